"""Benchmark a schemaMetadata change on a covered dataset handled end to end, to incident B.

Usage::

    python bench/bench_schema_event.py [--repeat 15] [--batch 200] [--max-wait 300]

The store (built fresh in a temp folder, through Reflex's own write path): ``repeat + batch``
datasets whose schemaMetadata holds ``amount_minor BIGINT``, covered by one schema_contract
lesson (``columns: {amount_minor: BIGINT}``) published the way a steward's approval publishes
it (``bench_schedule_sweep.publish``). The embedded pipeline (``Pipeline.create`` with the
config ``datahub-reflex demo`` runs, ``Demo.react``'s way: the real ``reflex-lite`` source, its
filter, the ``reflex`` action) first drains what the build wrote, untimed.

Measured:

- one event: a new schemaMetadata (``amount_minor`` now VARCHAR) written to one covered
  dataset, then one pipeline run (create, run until idle, close); from the write to incident B
  (asserted), median of ``repeat`` events, each on its own dataset;
- a batch: ``batch`` such changes on ``batch`` other datasets, then one pipeline run;
  events/s (every one of them must raise incident B);
- by hand, the same judgement: read the new schemaMetadata row(s) after the last seen rowid,
  ``json.loads``, find ``amount_minor`` and compare its native type in Python; and the same
  plus incident B and the run event written through ``LiteCatalog.emit`` (like with like).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_referential_integrity import bench_lock, wait_for_quiet
from bench_row_kinds import print_load, ratio
from bench_schedule_sweep import (
    APPROVED_AT,
    dataset_urn,
    emit_batched,
    hand_incident,
    lesson_of,
    publish,
    sweep_context,
)
from bench_uniqueness import load_average
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    IncidentInfoClass,
    OtherSchemaClass,
    SchemaFieldClass,
    SchemaMetadataClass,
)
from machine import machine_info

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.metadata import datahub_field_type
from reflex_actions.demo.run import embedded_pipeline_config

CONTRACT = {"type": "schema_contract", "columns": {"amount_minor": "BIGINT"}}
FIELD, EXPECTED_TYPE, CHANGED_TYPE = "amount_minor", "BIGINT", "VARCHAR"
OTHER_FIELDS = (("invoice_id", "VARCHAR"), ("issued_at", "TIMESTAMP"), ("customer_id", "BIGINT"))
SCHEMA_LESSON = lesson_of("schema", CONTRACT, "schema_change").urn


def schema(i: int, amount_type: str) -> Any:
    """Dataset ``i``'s schema as its ingestion records it, ``amount_minor`` of ``amount_type``."""
    fields = [*OTHER_FIELDS, (FIELD, amount_type)]
    return acting_as(
        "urn:li:corpuser:ingestion",
        dataset_urn(i),
        SchemaMetadataClass(
            schemaName=f"table_{i:05d}",
            platform="urn:li:dataPlatform:snowflake",
            version=0,
            hash="",
            platformSchema=OtherSchemaClass(rawSchema=""),
            fields=[
                SchemaFieldClass(
                    fieldPath=name, nativeDataType=native, type=datahub_field_type(native)
                )
                for name, native in fields
            ],
        ),
    )


def build(workdir: Path, n: int) -> Path:
    """The store: ``n`` datasets with the contract's schema, the lesson published on all."""
    store = workdir / "reflex.db"
    ctx = sweep_context(store)
    emit_batched(ctx.catalog, (schema(i, EXPECTED_TYPE) for i in range(n)))
    from reflex_actions.kinds.schema_change import SCHEMA_CHANGE

    lesson = lesson_of("schema", CONTRACT, SCHEMA_CHANGE)
    publish(ctx, lesson, [dataset_urn(i) for i in range(n)], APPROVED_AT)
    ctx.catalog.close()
    return store


def react(config: dict[str, Any]) -> None:
    """One pipeline run over what is new, as ``Demo.react`` does it."""
    from datahub_actions.pipeline.pipeline import Pipeline

    pipeline = Pipeline.create(config)
    try:
        pipeline.run()
    finally:
        pipeline.close()


def incidents_on(store: Path) -> set[str]:
    """The datasets incident B was raised on."""
    with contextlib.closing(sqlite3.connect(store)) as db:
        rows = db.execute(
            "SELECT json_extract(metadata, '$.entities[0]') FROM metadata_aspect_v2"
            " WHERE aspect_name = ? AND version = 0",
            [IncidentInfoClass.ASPECT_NAME],
        ).fetchall()
    return {urn for (urn,) in rows}


def last_rowid(db: sqlite3.Connection) -> int:
    return db.execute("SELECT coalesce(max(rowid), 0) FROM metadata_aspect_v2").fetchone()[0]


def hand_judge(db: sqlite3.Connection, after: int) -> list[tuple[str, int]]:
    """The schema changes written after rowid ``after`` that break the contract (by hand)."""
    broken = []
    for urn, metadata, created in db.execute(
        "SELECT urn, metadata, createdon FROM metadata_aspect_v2 WHERE rowid > ?"
        " AND aspect_name = 'schemaMetadata' AND version > 0 ORDER BY rowid",
        [after],
    ):
        fields = {f["fieldPath"]: f["nativeDataType"] for f in json.loads(metadata)["fields"]}
        if fields.get(FIELD, "").upper() != EXPECTED_TYPE:
            broken.append((urn, created))
    return broken


def hand_write(catalog: LiteCatalog, broken: list[tuple[str, int]]) -> None:
    """Incident B and the run event of each broken contract, through ``LiteCatalog.emit``."""
    from reflex_actions.executor import ControlResult
    from reflex_actions.handlers.assertions import (
        assertion_urn,
        recurrence_incident_urn,
        run_event_mcp,
    )
    from reflex_actions.handlers.own_runs import OwnRuns

    actor = ReflexConfig().service_actor
    unsealed = OwnRuns(catalog, is_own=lambda _: True)  # the embedded store names the writer
    for dataset, created in broken:
        run_id, assertion = f"schema-{created}", assertion_urn(SCHEMA_LESSON, dataset)
        result = ControlResult(
            control_type="hand", control="hand", snapshot=run_id, snapshot_id=run_id,
            passed=False, violation_count=1, violation_unit="columns", allowed_violations=0,
            rows_scanned=len(OTHER_FIELDS) + 1, sample=[], elapsed_ms=0.0,
        )  # fmt: skip
        incident = recurrence_incident_urn(assertion, run_id)
        catalog.emit(
            [
                hand_incident(incident, dataset, assertion, created, actor),
                run_event_mcp(assertion, dataset, created, run_id, result, None, actor, unsealed),
            ]
        )


def timed(run: Callable[[], Any]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def benchmark(repeat: int, batch: int, max_wait: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="reflex-schema-") as folder, bench_lock():
        workdir = Path(folder)
        started = time.perf_counter()
        store = build(workdir, repeat + batch)
        config = embedded_pipeline_config(workdir)
        drain_s = timed(lambda: react(config))  # what the build wrote, untimed below
        build_s = time.perf_counter() - started
        catalog = LiteCatalog(store)
        db = sqlite3.connect(store)
        start = wait_for_quiet(max_wait)

        def change(i: int) -> None:
            catalog.emit([schema(i, CHANGED_TYPE)])

        single, single_hand, single_hand_writes = [], [], []
        for i in range(repeat):
            single.append(timed(lambda i=i: (change(i), react(config))))
            assert dataset_urn(i) in incidents_on(store), f"no incident B on dataset {i}"
            # the same change by hand, on the same dataset changed again: Lite does not
            # rewrite an unchanged aspect, so each hand round changes the type's length
            for k, (timings, write) in enumerate(
                ((single_hand, False), (single_hand_writes, True))
            ):
                after = last_rowid(db)
                catalog.emit([schema(i, f"{CHANGED_TYPE}({64 + k})")])

                def by_hand(after: int = after, write: bool = write, i: int = i) -> None:
                    broken = hand_judge(db, after)
                    assert [urn for urn, _ in broken] == [dataset_urn(i)], broken
                    if write:
                        hand_write(catalog, broken)

                timings.append(timed(by_hand))
        react(config)  # the hand-made rows reach the pipeline here, off the clock
        first = repeat
        batch_urns = {dataset_urn(i) for i in range(first, first + batch)}
        before = incidents_on(store)
        assert not batch_urns & before
        emit_batched(catalog, (schema(i, CHANGED_TYPE) for i in range(first, first + batch)))
        batch_s = timed(lambda: react(config))
        assert batch_urns <= incidents_on(store), "a batch change raised no incident B"
        after = last_rowid(db)
        emit_batched(
            catalog, (schema(i, f"{CHANGED_TYPE}(64)") for i in range(first, first + batch))
        )
        broken: list[tuple[str, int]] = []
        hand_batch_s = timed(lambda: broken.extend(hand_judge(db, after)))
        assert {urn for urn, _ in broken} == batch_urns
        hand_batch_writes_s = timed(lambda: hand_write(catalog, broken))
        runs = sum(
            1
            for (urn,) in db.execute(
                "SELECT urn FROM metadata_aspect_v2 WHERE aspect_name = ? AND version > 0",
                [AssertionRunEventClass.ASPECT_NAME],
            )
        )
        db.close()
        catalog.close()
        load_after = load_average()
    median = statistics.median
    return {
        "benchmark": "schema_event",
        "datasets": repeat + batch,
        "repeat": repeat,
        "batch": batch,
        "build_s": round(build_s, 1),
        "drain_s": round(drain_s, 2),
        "run_events": runs,
        "single_event_ms": {
            "reflex_pipeline": round(median(single) * 1000, 2),
            "reflex_pipeline_best": round(min(single) * 1000, 2),
            "hand_judge": round(median(single_hand) * 1000, 3),
            "hand_judge_and_write": round(median(single_hand_writes) * 1000, 3),
        },
        "single_runs_ms": [round(s * 1000, 1) for s in single],
        "batch_events_per_s": {
            "reflex_pipeline": round(batch / batch_s, 1),
            "hand_judge": round(batch / hand_batch_s, 1),
            "hand_judge_and_write": round(batch / (hand_batch_s + hand_batch_writes_s), 1),
        },
        "batch_seconds": {
            "reflex_pipeline": round(batch_s, 3),
            "hand_judge": round(hand_batch_s, 4),
            "hand_judge_and_write": round(hand_batch_s + hand_batch_writes_s, 3),
        },
        "ratios": {
            "single_reflex_vs_hand_judge_and_write": ratio(
                median(single), median(single_hand_writes)
            ),
            "batch_reflex_vs_hand_judge_and_write": ratio(
                batch_s, hand_batch_s + hand_batch_writes_s
            ),
        },
        "load_average": {
            "before": start["load"],
            "after": load_after,
            "waited_seconds": start["waited_seconds"],
        },
        "machine": {**machine_info("acryl-datahub", "acryl-datahub-actions", "duckdb")},
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        f"\nschemaMetadata change -> incident B on a Lite store of {result['datasets']} covered "
        f"datasets ({result['repeat']} single events, a batch of {result['batch']})"
    )
    for name, value in result["single_event_ms"].items():
        print(f"  one event, {name:<24} {value:10.2f} ms")
    for name, value in result["batch_events_per_s"].items():
        print(f"  batch, {name:<28} {value:10.1f} events/s")
    for name, value in result["ratios"].items():
        print(f"  {name}: {value:.1f}x")
    print_load(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--max-wait", type=float, default=300.0, help="seconds to wait for quiet")
    args = parser.parse_args()
    result = benchmark(args.repeat, args.batch, args.max_wait)
    print_table(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
