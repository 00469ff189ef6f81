"""Benchmark how long a landing waits for its incident B while a schedule sweep of a large
estate is running (issue 26: the sweep must never hold events back).

Usage::

    python bench/bench_sweep_latency.py [--datasets 100000] [--landings 5] [--data-dir bench/data]

The store (built once and cached in ``--data-dir``, see ``build``): N Snowflake datasets (their
``schemaMetadata``), none with a recorded update (every sweep judges, and fails, each one: the
heaviest sweep there is); a freshness lesson waiting for approval (gate 2); and a uniqueness
lesson published on one more dataset (Hive), whose landing is measured.

Measured, in one process, with the action as the pipeline runs it (``ReflexAction``, its
worker thread and its turns):

- ``alone``: a landing with duplicated keys handled with nothing else running, from ``act()``
  to its incident B in the store (the floor);
- the estate reached through the gate, as a team would: a steward's approval of the freshness
  lesson with ``reflex.scopeRule`` ``{platform: snowflake}`` handed to ``act()`` (its own
  decision publishes the first datasets), then the rollout of the rest in slices beside the
  events: ``--landings`` landings handled during it, and its pace (ms a dataset);
- ``during sweep``: once the rollout is done (or ``--rollout-wait`` passed), a sweep of the
  whole estate, and ``--landings`` landings handled during it; the sweep's pace meanwhile.

The sweep is not waited for: at 100,000 datasets it runs for minutes (it goes on, in slices,
beside the events); the process ends once the landings are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow
import pyarrow.parquet
from bench_catalog import BENCH_DIR
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeLogClass,
    OperationClass,
    OperationTypeClass,
    StringTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)
from machine import machine_info

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.controls import parse_control_spec
from reflex_actions.handlers.assertions import (
    assertion_mcp,
    assertion_urn,
    recurrence_incident_urn,
)
from reflex_actions.handlers.lesson_store import lesson_term_mcp
from reflex_actions.lessons.model import ApprovedVersion, Lesson, LessonState, ProposerInfo
from reflex_actions.times import now_ms
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    COVERAGE,
    ROOT_CAUSE_STATUS,
    SCOPE_RULE,
)

GENERATOR_VERSION = 3
FRESHNESS = {"type": "freshness", "max_age": "26h"}
UNIQUENESS = {"type": "uniqueness", "field": "transaction_id"}
REFLEX = ReflexConfig().service_actor
STEWARD = "urn:li:corpuser:bench-steward"
LANDED = "urn:li:dataset:(urn:li:dataPlatform:hive,bench.landed,PROD)"
RULED = "urn:li:glossaryTerm:reflex.lesson.bench-rule"
RULE = "{platform: snowflake}"


def dataset_urn(i: int) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:snowflake,warehouse.sales.table_{i:06d},PROD)"


def published(urn: str, control: dict[str, Any], scope: list[str]) -> Lesson:
    """A lesson as publishing leaves it: approved on ``scope``, in force since the epoch."""
    return pending(urn, control).model_copy(
        update={
            "state": LessonState.PUBLISHED,
            "published_scope": scope,
            "gate_values": {ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"},
            "approval_open": False,
            "approved": ApprovedVersion(
                control=control,
                scope=scope,
                actor=STEWARD,
                at=1,
                digest=ApprovedVersion.digest_of(control, scope),
            ),
            "in_force_since": 1,
        }
    )


def pending(urn: str, control: dict[str, Any]) -> Lesson:
    """A lesson confirmed, backtested and open for approval (gate 2)."""
    return Lesson(
        urn=urn,
        incident=f"urn:li:incident:{urn.rsplit('.', 1)[-1]}",
        source_dataset=None,
        affected_assets=[],
        failure_pattern="bench",
        root_cause="bench",
        evidence=[],
        control=control,
        confidence=0.9,
        rationale="",
        proposer=ProposerInfo(name="deterministic"),
        state=LessonState.PENDING_APPROVAL,
        gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "PENDING"},
        approval_open=True,
    )


def _coverage(lesson: str) -> StructuredPropertiesClass:
    return StructuredPropertiesClass(
        properties=[StructuredPropertyValueAssignmentClass(propertyUrn=COVERAGE, values=[lesson])]
    )


def build(store: Path, datasets: int) -> None:
    """The first dataset's ``schemaMetadata`` is written through ``LiteCatalog.emit``; the
    others' are that row as Lite stored it with the dataset swapped in (writing 100,000
    aspects one by one through Lite's write path takes many minutes). The lessons' terms and
    the landed dataset's assertion are written through ``emit``."""
    sys.path.insert(0, str(BENCH_DIR.parent))  # tests/ is importable from a checkout
    from tests.catalog.builders import field, schema

    catalog = LiteCatalog(store)
    template = dataset_urn(0)
    column = field("id", "text", StringTypeClass())
    catalog.emit([acting_as(STEWARD, template, schema(column))])
    _clone(store, template, [dataset_urn(i) for i in range(1, datasets)])
    landed = published("urn:li:glossaryTerm:reflex.lesson.bench-landed", UNIQUENESS, [LANDED])
    catalog.emit(
        [
            lesson_term_mcp(pending(RULED, FRESHNESS), "bench freshness", REFLEX),
            lesson_term_mcp(landed, "bench uniqueness", REFLEX),
            assertion_mcp(landed, LANDED, parse_control_spec(UNIQUENESS), REFLEX),
            acting_as(REFLEX, LANDED, _coverage(landed.urn)),
        ]
    )
    catalog.close()


def _clone(store: Path, template: str, datasets: list[str]) -> None:
    """The template dataset's rows, once for each of ``datasets``."""
    with closing(sqlite3.connect(store)) as db:
        stored = db.execute(
            "SELECT aspect_name, version, metadata, system_metadata, createdon"
            " FROM metadata_aspect_v2 WHERE urn = ?",
            [template],
        ).fetchall()
        rows = [(dataset, *row) for dataset in datasets for row in stored]
        db.executemany("INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?)", rows)
        db.commit()


def approval(offset: int) -> EventEnvelope:
    """The steward's approval of the freshness lesson on every Snowflake dataset."""

    def aspect(values: dict[str, str]) -> GenericAspectClass:
        properties = [{"propertyUrn": p, "values": [{"string": v}]} for p, v in values.items()]
        return GenericAspectClass(
            value=json.dumps({"properties": properties}).encode(), contentType="application/json"
        )

    before = {
        ROOT_CAUSE_STATUS: "CONFIRMED",
        APPROVAL: "PENDING",
        CONTROL_SPEC: "{type: freshness, max_age: 26h}",
        SCOPE_RULE: RULE,
    }
    mcl = MetadataChangeLogClass(
        entityType="glossaryTerm",
        entityUrn=RULED,
        changeType=ChangeTypeClass.UPSERT,
        aspectName="structuredProperties",
        aspect=aspect({**before, APPROVAL: "APPROVED"}),
        previousAspectValue=aspect(before),
        created=AuditStampClass(time=now_ms(), actor=STEWARD),
    )
    meta = {"kafka": {"topic": "MetadataChangeLog_Versioned_v1", "partition": 0, "offset": offset}}
    return EventEnvelope(
        METADATA_CHANGE_LOG_EVENT_V1_TYPE, MetadataChangeLogEvent.from_class(mcl), meta
    )


def covered(store: Path) -> int:
    """The datasets the rule's lesson covers so far."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM metadata_aspect_v2 WHERE aspect_name = 'structuredProperties'"
            " AND version = 0 AND urn LIKE 'urn:li:dataset:%' AND metadata LIKE ?",
            [f"%{RULED}%"],
        ).fetchone()
    return count


def landing(root: Path, n: int) -> EventEnvelope:
    """Duplicated keys land on the covered dataset: the operation its loader reports."""
    snapshot = root / f"landing-{n}.parquet"
    table = pyarrow.table({"transaction_id": ["T1", "T1", f"T{n}"]})
    pyarrow.parquet.write_table(table, snapshot)
    operation = OperationClass(
        timestampMillis=now_ms(),
        lastUpdatedTimestamp=now_ms(),
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": f"landing-{n}"},
    )
    value = json.dumps(operation.to_obj()).encode()
    mcl = MetadataChangeLogClass(
        entityType="dataset",
        entityUrn=LANDED,
        changeType=ChangeTypeClass.UPSERT,
        aspectName="operation",
        aspect=GenericAspectClass(value=value, contentType="application/json"),
        created=AuditStampClass(time=now_ms(), actor="urn:li:corpuser:loader"),
    )
    event = MetadataChangeLogEvent.from_class(mcl)
    meta = {"kafka": {"topic": "MetadataChangeLog_Timeseries_v1", "partition": 0, "offset": n}}
    return EventEnvelope(METADATA_CHANGE_LOG_EVENT_V1_TYPE, event, meta)


def run_events(store: Path) -> int:
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM metadata_aspect_v2"
            " WHERE aspect_name = 'assertionRunEvent' AND version > 0"
        ).fetchone()
    return count


def handled_in(action: ReflexAction, store: Path, root: Path, n: int) -> float:
    """Seconds from the landing's event to its incident B in the store."""
    envelope = landing(root, n)
    started = time.perf_counter()
    action.act(envelope)
    took = time.perf_counter() - started
    incident = recurrence_incident_urn(
        assertion_urn("urn:li:glossaryTerm:reflex.lesson.bench-landed", LANDED), f"landing-{n}"
    )
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        raised = db.execute(
            "SELECT 1 FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = 'incidentInfo'",
            [incident],
        ).fetchone()
    assert raised, f"no incident B for landing {n}"
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=100_000)
    parser.add_argument("--landings", type=int, default=5)
    parser.add_argument("--spacing", type=float, default=10.0, help="seconds between landings")
    parser.add_argument("--data-dir", type=Path, default=BENCH_DIR / "data")
    parser.add_argument(
        "--rollout-wait", type=float, default=900.0, help="most seconds to wait for the rollout"
    )
    args = parser.parse_args()

    cached = args.data_dir / f"sweep_latency_{args.datasets}_v{GENERATOR_VERSION}.db"
    if not cached.exists():
        print(f"building {cached} ({args.datasets:,} datasets) ...")
        args.data_dir.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        build(partial, args.datasets)
        partial.rename(cached)
    work = args.data_dir / "sweep_latency_work"
    work.mkdir(exist_ok=True)
    store = work / "reflex.db"
    for leftover in work.glob("reflex.db*"):
        leftover.unlink()
    shutil.copyfile(cached, store)
    root = work / "landing"
    root.mkdir(exist_ok=True)
    config = ReflexConfig.model_validate(
        {
            "store": str(store),
            "schedule": {"interval": "1h"},
            "landing": {"allowed_roots": [str(root)]},
            "approvers": {"users": [STEWARD]},
        }
    )
    info = machine_info("duckdb", "acryl-datahub")
    action = ReflexAction(config, LiteCatalog(store))

    alone = [handled_in(action, store, root, n) for n in range(3)]

    started = time.perf_counter()
    action.act(approval(offset=1))
    decision_s = time.perf_counter() - started
    during_rollout = []
    while (done := covered(store)) < args.datasets:
        if time.perf_counter() - started > args.rollout_wait:
            break
        if len(during_rollout) < args.landings:
            time.sleep(args.spacing)
            during_rollout.append(handled_in(action, store, root, 10 + len(during_rollout)))
        else:
            time.sleep(1)
    rollout_s = time.perf_counter() - started

    action.on_tick(now_ms())
    sweep_started, runs_before = time.perf_counter(), run_events(store)
    during = []
    for n in range(args.landings):
        time.sleep(args.spacing)
        during.append(handled_in(action, store, root, 100 + n))
    swept = run_events(store) - runs_before - args.landings
    elapsed = time.perf_counter() - sweep_started
    result = {
        "machine": info,
        "datasets": args.datasets,
        "alone_s": [round(t, 3) for t in alone],
        "approval_decision_s": round(decision_s, 3),
        "rollout_covered": done,
        "rollout_finished": done >= args.datasets,
        "rollout_s": round(rollout_s, 1),
        "rollout_ms_per_dataset": round(rollout_s * 1000 / max(done, 1), 2),
        "during_rollout_s": [round(t, 3) for t in during_rollout],
        "during_rollout_max_s": round(max(during_rollout, default=0), 3),
        "during_sweep_s": [round(t, 3) for t in during],
        "during_sweep_median_s": round(statistics.median(during), 3),
        "during_sweep_max_s": round(max(during), 3),
        "sweep_runs_written": swept,
        # the pace while it ran: meaningless once it finished before the last landing
        "sweep_finished": swept >= args.datasets,
        "sweep_ms_per_dataset": round(elapsed * 1000 / max(swept, 1), 2),
        "load_average_after": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    os._exit(0)  # the sweep goes on in its thread; the measurement is done


if __name__ == "__main__":
    main()
