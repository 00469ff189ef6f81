"""Benchmark the closed loop: demo wall time, landing to incident B, unrelated-event drop rate.

Usage::

    python bench/bench_loop.py [--rows 1000000] [--events 200000]

1. ``demo``: wall time of ``run_demo`` (both scenarios, the real datahub-actions pipeline on the
   embedded store), including generating the snapshot histories. Target: under 60 s.
2. ``landing``: after the demo, a ``--rows`` Parquet snapshot with retry duplicates lands on
   finance.ledger_entries; time from writing the operation to incident B being in the store
   (one pipeline run: change feed, routing, control run, run event, incident). Baseline in the
   same run: the control alone on the same file (``run_control``), i.e. the DuckDB work.
3. ``drop``: ``ReflexAction.act`` on ``--events`` MCL envelopes for aspects Reflex does not
   route, events per second; baseline: the same loop calling a function that returns at once.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import duckdb
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    IncidentInfoClass,
    MetadataChangeLogClass,
    OperationClass,
    OperationTypeClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)
from datahub_actions.pipeline.pipeline_context import PipelineContext
from machine import machine_info

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.catalog.steward import acting_as
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.run import Demo, embedded_pipeline_config, run_demo
from reflex_actions.executor import run_control
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for

LEDGER = dataset_urn("finance.ledger_entries")
PAYMENTS_INCIDENT = "urn:li:incident:reflex-demo-payments-duplicates"


def big_snapshot(path: Path, rows: int) -> None:
    """A ledger snapshot of ``rows`` rows, 0.1 % of them retried."""
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.connect().execute(
        f"""COPY (
            SELECT 'TXN-' || lpad(CAST(i AS VARCHAR), 10, '0') AS transaction_id,
                   'E-' || i AS entry_id, 'ACC-' || (i % 9000) AS account_id,
                   CAST(i % 1000 AS DECIMAL(18, 2)) AS amount, TIMESTAMP '2026-10-02' AS posted_at
            FROM range({rows}) t(i)
            UNION ALL
            SELECT 'TXN-' || lpad(CAST(i AS VARCHAR), 10, '0'), 'E-' || i, 'ACC-' || (i % 9000),
                   CAST(i % 1000 AS DECIMAL(18, 2)), TIMESTAMP '2026-10-02'
            FROM range({rows // 1000}) t(i)
        ) TO '{path}' (FORMAT parquet)"""
    )


def landing_to_incident(workdir: Path, rows: int) -> dict[str, float]:
    demo = Demo(workdir, say=lambda _: None)
    snapshot = workdir / "snapshots" / "landing" / "finance.ledger_entries" / "2026-10-02.parquet"
    big_snapshot(snapshot, rows)
    started = time.perf_counter()
    control_only = run_control(UniquenessControl(field="transaction_id"), snapshot)
    control_seconds = time.perf_counter() - started
    landed_at = demo.tick() + 10_000_000
    operation = OperationClass(
        timestampMillis=landed_at,
        lastUpdatedTimestamp=landed_at,
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": "2026-10-02"},
    )
    started = time.perf_counter()
    demo.catalog.emit([acting_as("urn:li:corpuser:datahub", LEDGER, operation)])
    demo.react()
    loop_seconds = time.perf_counter() - started
    assertion = assertion_urn(lesson_urn_for(PAYMENTS_INCIDENT), LEDGER)
    incident = recurrence_incident_urn(assertion, "2026-10-02")
    assert demo.catalog.get_aspect(incident, IncidentInfoClass) is not None, "no incident B"
    assert control_only.violation_count == rows // 1000
    return {
        "rows": rows + rows // 1000,
        "landing_to_incident_s": round(loop_seconds, 3),
        "control_alone_s": round(control_seconds, 3),
        "overhead_ratio": round(loop_seconds / control_seconds, 2),
    }


def unrelated_envelopes(count: int) -> list[EventEnvelope]:
    aspects = [("dataset", "datasetProperties"), ("chart", "chartInfo"), ("dataset", "status")]
    envelopes = []
    for i in range(count):
        entity_type, aspect_name = aspects[i % len(aspects)]
        mcl = MetadataChangeLogClass(
            entityType=entity_type,
            entityUrn=f"urn:li:{entity_type}:(urn:li:dataPlatform:x,t{i},PROD)",
            changeType=ChangeTypeClass.UPSERT,
            aspectName=aspect_name,
            aspect=GenericAspectClass(contentType="application/json", value=b'{"name": "x"}'),
            created=AuditStampClass(time=i, actor="urn:li:corpuser:datahub"),
        )
        envelopes.append(
            EventEnvelope(
                METADATA_CHANGE_LOG_EVENT_V1_TYPE, MetadataChangeLogEvent.from_class(mcl), {}
            )
        )
    return envelopes


def drop_rate(workdir: Path, count: int) -> dict[str, float]:
    config = embedded_pipeline_config(workdir)["action"]["config"]
    action = ReflexAction.create(config, PipelineContext(pipeline_name="bench", graph=None))
    envelopes = unrelated_envelopes(count)
    started = time.perf_counter()
    for envelope in envelopes:
        action.act(envelope)
    action_seconds = time.perf_counter() - started

    def nothing(_: EventEnvelope) -> None:
        return None

    started = time.perf_counter()
    for envelope in envelopes:
        nothing(envelope)
    baseline_seconds = time.perf_counter() - started
    action.close()
    return {
        "events": count,
        "events_per_s": round(count / action_seconds),
        "noop_events_per_s": round(count / baseline_seconds),
        "ratio_to_noop": round(action_seconds / baseline_seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reflex-bench-") as tmp:
        workdir = Path(tmp) / "demo"
        started = time.perf_counter()
        assert run_demo(workdir, say=lambda _: None), "the demo did not close both loops"
        demo_seconds = round(time.perf_counter() - started, 2)
        landing = landing_to_incident(workdir, args.rows)
        drop = drop_rate(workdir, args.events)
    print(f"demo wall time: {demo_seconds:.1f} s (target < 60 s)")
    print(
        f"landing -> incident B, {landing['rows']:,} rows: "
        f"{landing['landing_to_incident_s']:.2f} s "
        f"(the control alone: {landing['control_alone_s']:.2f} s)"
    )
    print(
        f"unrelated MCL events dropped: {drop['events_per_s']:,}/s "
        f"({drop['ratio_to_noop']}x a no-op call)"
    )
    machine = machine_info("duckdb", "acryl-datahub-actions")
    print(
        json.dumps({"demo_s": demo_seconds, "landing": landing, "drop": drop, "machine": machine})
    )


if __name__ == "__main__":
    main()
