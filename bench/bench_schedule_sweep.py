"""Benchmark one schedule sweep (``on_schedule``) over 10,000 covered datasets, judged from
DataHub metadata alone, against hand-written sweeps over the same Lite file.

Usage::

    python bench/bench_schedule_sweep.py [--datasets 10000] [--repeat 3] [--data-dir bench/data]
        [--max-wait 300] [--profile]

The store (built once through Reflex's own write path and cached in ``--data-dir``): N datasets
(``datasetProperties``), each covered by two lessons published the way a steward's approval
publishes them (``publish.on_approved``: the lesson's term and machine state, an assertion per
dataset from ``assertion_mcp``, the ``reflex.coverage`` property):

- a freshness lesson without ``timestamp_field`` (``max_age`` 26h): judged on the dataset's
  latest ``operation`` (``lastUpdatedTimestamp``);
- a volume lesson (``max_drop`` 0.5 against the median of the last 7 counts): judged on the
  latest ``datasetProfile.rowCount`` when the profile is newer than its last run.

The build then runs one production sweep (``on_schedule`` at T0: every dataset fresh and at its
usual count, so every assertion has a run and the volume runs carry their counts forward) and
writes the next day's metadata: a new profile per dataset (one in SHORT_EVERY at a tenth of
its earlier count) and a new operation (one in STALE_EVERY last updated three days before T1,
the others an hour before).

Measured, each approach in a fresh process on its own copy of the cached store:

- ``reflex``: ``on_schedule(ctx, T1, 3600)`` cold (the first sweep of the slot: every control
  due, a run event per control, incident B per failure), then the second sweep in the same slot
  (nothing due, nothing written);
- ``hand_sql``: the verdicts in one SQL query over ``metadata_aspect_v2`` (``json_extract`` of
  the latest operation, profile and volume run per dataset of each lesson's published scope);
- ``hand_python``: the same rows fetched as JSON text and judged in a Python loop;
- ``hand_sql_writes``: ``hand_sql``'s verdicts, then the same run events (``run_event_mcp``)
  and incidents B written through the same ``LiteCatalog.emit`` path, so the ratio compares
  like with like.

Every approach must find exactly the planted stale and short datasets (asserted). The machine
is shared: the measurement holds ``/tmp/reflex-bench.lock`` and waits for a quiet machine, as
``bench_referential_integrity.py`` does; ``--profile`` adds a cProfile of one cold sweep.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import pstats
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench_catalog import BENCH_DIR, FIXED_MILLIS
from bench_referential_integrity import bench_lock, interleaved_rounds
from bench_row_kinds import print_load, ratio
from bench_uniqueness import max_rss_mb, run_stats, spawn
from datahub.emitter.mce_builder import make_dataset_urn
from datahub.emitter.serialization_helper import pre_json_transform
from datahub.metadata.schema_classes import (
    DatasetProfileClass,
    DatasetPropertiesClass,
    IncidentInfoClass,
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
)
from machine import machine_info

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.controls import control_spec, dump_control_line, parse_control_spec
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext, decide_then_apply
from reflex_actions.lessons.model import Lesson, LessonState, ProposerInfo

GENERATOR_VERSION = 1  # bump when the generated store changes, to invalidate the cache
INTERVAL_S = 3600  # the schedule's interval
HOUR_MS = 3600 * 1000
APPROVED_AT = FIXED_MILLIS  # both lessons are approved then
T0 = APPROVED_AT + 2 * HOUR_MS  # the sweep the build runs (every dataset fresh, usual counts)
T1 = T0 + 24 * HOUR_MS  # the measured sweep, the next day
STALE_EVERY = 20  # one dataset in this many stopped loading three days before T1
STALE_AT = 3
SHORT_EVERY = 25  # one dataset in this many loaded a tenth of its usual rows before T1
SHORT_AT = 5
FRESHNESS = {"type": "freshness", "max_age": "26h"}
VOLUME = {"type": "volume", "max_drop": 0.5, "window": 7}
MAX_AGE_MS = 26 * HOUR_MS
STEWARD = "urn:li:corpuser:bench-steward"
BATCH = 500  # MCPs per emit() call while building
APPROACHES = ("reflex", "hand_sql", "hand_python", "hand_sql_writes")
HAND = ("hand_sql", "hand_python")  # verdicts only; the faster is the reference


# --- the store ----------------------------------------------------------------------------------


def dataset_urn(i: int) -> str:
    return make_dataset_urn("snowflake", f"warehouse.sales.table_{i:05d}")


def usual_rows(i: int) -> int:
    return 100_000 + (i * 7919) % 900_000


def planted(n: int) -> dict[str, list[str]]:
    """The datasets the generator makes fail each control."""
    return {
        "stale": [dataset_urn(i) for i in range(STALE_AT, n, STALE_EVERY)],
        "short": [dataset_urn(i) for i in range(SHORT_AT, n, SHORT_EVERY)],
    }


def lesson_of(name: str, control: dict[str, Any], pattern: str) -> Lesson:
    """A lesson waiting for scope approval (backtested, its approval gate open)."""
    return Lesson(
        urn=f"urn:li:glossaryTerm:reflex.lesson.bench-{name}",
        incident=f"urn:li:incident:bench-{name}",
        source_dataset=None,
        affected_assets=[],
        failure_pattern=pattern,
        root_cause=f"bench: {name}",
        evidence=[],
        control=control_spec(parse_control_spec(control)),
        confidence=0.9,
        rationale="",
        proposer=ProposerInfo(name="deterministic"),
        state=LessonState.PENDING_APPROVAL,
        approval_open=True,
    )


def approval(lesson: Lesson, scope: Sequence[str], at: int) -> AspectChange:
    """The steward's approval event: the scope and the control spec that was backtested."""
    from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, SCOPE

    values = {
        APPROVAL: ["APPROVED"],
        CONTROL_SPEC: [dump_control_line(parse_control_spec(lesson.control))],
        SCOPE: list(scope),
    }
    properties = StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(propertyUrn=urn, values=list(v))
            for urn, v in values.items()
        ]
    )
    return AspectChange(
        entity_type="glossaryTerm",
        urn=lesson.urn,
        aspect_name=StructuredPropertiesClass.ASPECT_NAME,
        aspect=pre_json_transform(properties.to_obj()),
        previous=None,
        actor=STEWARD,
        time_ms=at,
    )


def publish(ctx: HandlerContext, lesson: Lesson, scope: Sequence[str], at: int) -> Lesson:
    """Publish ``lesson`` on ``scope`` exactly as the approval handler does."""
    from reflex_actions.handlers.publish import on_approved

    refusal: list[str | None] = []
    decide_then_apply(
        ctx, lambda: refusal.append(on_approved(lesson, approval(lesson, scope, at), ctx))
    )
    assert refusal == [None], f"not published: {refusal}"
    published = ctx.lesson(lesson.urn)
    assert published is not None and published.state is LessonState.PUBLISHED
    assert len(published.published_scope) == len(scope), published.publish_skipped[:3]
    return published


def emit_batched(catalog: LiteCatalog, mcps: Iterator[Any]) -> None:
    batch: list[Any] = []
    for mcp in mcps:
        batch.append(mcp)
        if len(batch) == BATCH:
            catalog.emit(batch)
            batch = []
    if batch:
        catalog.emit(batch)


def operation(i: int, updated_ms: int) -> Any:
    return acting_as(
        "urn:li:corpuser:loader",
        dataset_urn(i),
        OperationClass(
            timestampMillis=updated_ms,
            operationType=OperationTypeClass.INSERT,
            lastUpdatedTimestamp=updated_ms,
        ),
    )


def profile(i: int, at_ms: int, rows: int) -> Any:
    return acting_as(
        "urn:li:corpuser:profiler",
        dataset_urn(i),
        DatasetProfileClass(timestampMillis=at_ms, rowCount=rows, columnCount=8),
    )


def sweep_context(path: Path) -> HandlerContext:
    return HandlerContext(catalog=LiteCatalog(path), config=ReflexConfig(store=path))


def build_store(path: Path, n: int) -> dict[str, Any]:
    """Write the store described in the module docstring into ``path`` (atomically)."""
    tmp = path.with_name(path.name + ".tmp")
    remove_store(tmp)
    started = time.perf_counter()
    ctx = sweep_context(tmp)
    # Build only: without an fsync per commit (Lite commits every MCP), the build is ~2x faster.
    ctx.catalog._db.execute("PRAGMA synchronous=NORMAL")  # type: ignore[attr-defined]
    yesterday = T0 - HOUR_MS
    emit_batched(
        ctx.catalog,
        (
            mcp
            for i in range(n)
            for mcp in (
                acting_as(
                    "urn:li:corpuser:ingestion",
                    dataset_urn(i),
                    DatasetPropertiesClass(name=f"table_{i:05d}"),
                ),
                operation(i, yesterday),
                profile(i, yesterday, usual_rows(i)),
            )
        ),
    )
    scope = [dataset_urn(i) for i in range(n)]
    from reflex_actions.kinds.missing_rows import MISSING_ROWS
    from reflex_actions.kinds.stale_data import STALE_DATA

    publish(ctx, lesson_of("freshness", FRESHNESS, STALE_DATA), scope, APPROVED_AT)
    publish(ctx, lesson_of("volume", VOLUME, MISSING_ROWS), scope, APPROVED_AT)
    published_s = time.perf_counter() - started
    from reflex_actions.handlers.scheduled import on_schedule

    with one_duckdb_database():  # the same run events, 5x sooner (see RESULTS.md)
        first = on_schedule(ctx, T0, INTERVAL_S)
    assert (first.judged, first.failed, first.errors) == (2 * n, 0, 0), first
    today = T1 - HOUR_MS
    stale, short = (set(urns) for urns in planted(n).values())
    emit_batched(
        ctx.catalog,
        (
            mcp
            for i in range(n)
            for mcp in (
                operation(i, T1 - 72 * HOUR_MS if dataset_urn(i) in stale else today),
                profile(
                    i, today, usual_rows(i) // 10 if dataset_urn(i) in short else usual_rows(i)
                ),
            )
        ),
    )
    ctx.catalog.close()
    with contextlib.closing(sqlite3.connect(tmp)) as db:  # fold the WAL in: one file to copy
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    remove_store(path)
    tmp.rename(path)
    remove_store(tmp)
    report = {
        "build_s": round(time.perf_counter() - started, 1),
        "publish_s": round(published_s, 1),
    }
    build_log(path).write_text(json.dumps(report) + "\n")
    return report


def store_path(data_dir: Path, n: int) -> Path:
    return data_dir / f"schedule_{n}_v{GENERATOR_VERSION}.db"


def build_log(path: Path) -> Path:
    return path.with_name(path.name + ".build.json")


def remove_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def ensure_store(data_dir: Path, n: int, rebuild: bool) -> tuple[Path, dict[str, Any]]:
    path = store_path(data_dir, n)
    if rebuild or not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        print(f"building {path} ({n:,} datasets) ...", flush=True)
        report = build_store(path, n)
        print(f"  built in {report['build_s']} s", flush=True)
    return path, json.loads(build_log(path).read_text())


@contextlib.contextmanager
def store_copy(path: Path) -> Iterator[Path]:
    """A private copy of the cached store (every approach writes into its own)."""
    with tempfile.TemporaryDirectory(prefix="reflex-sweep-") as folder:
        copy = Path(folder) / path.name
        shutil.copyfile(path, copy)
        yield copy


# --- approaches ---------------------------------------------------------------------------------
# Each runs in a fresh process on its own copy of the store and returns the datasets it found
# stale and short. Imports happen before the clock starts.

FRESHNESS_LESSON = lesson_of("freshness", FRESHNESS, "stale_data").urn
VOLUME_LESSON = lesson_of("volume", VOLUME, "missing_rows").urn


def failures_recorded(path: Path) -> dict[str, list[str]]:
    """Incident B's datasets in the store, split by the lesson whose assertion raised it."""
    from reflex_actions.handlers.assertions import assertion_urn

    found: dict[str, list[str]] = {"stale": [], "short": []}
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = db.execute(
            "SELECT json_extract(metadata, '$.entities[0]'), json_extract(metadata,"
            " '$.source.sourceUrn') FROM metadata_aspect_v2 WHERE aspect_name = ?"
            " AND version = 0",
            [IncidentInfoClass.ASPECT_NAME],
        ).fetchall()
    for dataset, assertion in rows:
        kind = "stale" if assertion == assertion_urn(FRESHNESS_LESSON, dataset) else "short"
        found[kind].append(dataset)
    return {kind: sorted(urns) for kind, urns in found.items()}


def rows_written(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT count(*) FROM metadata_aspect_v2").fetchone()[0]


def timed(run: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    wall, cpu = time.perf_counter(), time.process_time()
    answer = run()
    return answer, {
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "peak_rss_mb": max_rss_mb(),
    }


@contextlib.contextmanager
def one_duckdb_database() -> Iterator[None]:
    """Experiment only (``--one-duckdb``, and the build's own sweep): answer the executor's
    ``duckdb.connect()`` with a cursor of one in-memory database opened once, to measure what
    reusing it would save. Product code is not changed; the patch ends with the block."""
    import duckdb

    from reflex_actions import executor

    shared = duckdb.connect()

    class OneDatabase:
        def connect(self, *args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
            return shared.cursor()

        def __getattr__(self, name: str) -> Any:
            return getattr(duckdb, name)

    executor.duckdb = OneDatabase()  # type: ignore[assignment]
    try:
        yield
    finally:
        executor.duckdb = duckdb
        shared.close()


def reflex(path: Path) -> dict[str, Any]:
    """``on_schedule`` cold at T1, then again in the same slot."""
    from reflex_actions.handlers.scheduled import on_schedule

    ctx = sweep_context(path)
    before = rows_written(path)
    cold, cold_measured = timed(lambda: on_schedule(ctx, T1, INTERVAL_S))
    after_cold = rows_written(path)
    again, again_measured = timed(lambda: on_schedule(ctx, T1 + 60_000, INTERVAL_S))
    ctx.catalog.close()
    return {
        **cold_measured,
        "again": {
            **again_measured,
            "counts": asdict(again),
            "rows": rows_written(path) - after_cold,
        },
        "counts": asdict(cold),
        "rows": after_cold - before,
        "found": failures_recorded(path),
    }


def covered_table(db: sqlite3.Connection) -> None:
    """The datasets of each lesson's published scope, with their assertions (as Reflex derives
    them), in a temp table the hand-written queries join on."""
    from reflex_actions.handlers.assertions import assertion_urn

    scopes = {}
    for lesson in (FRESHNESS_LESSON, VOLUME_LESSON):
        (text,) = db.execute(
            "SELECT json_extract(metadata, '$.customProperties.\"reflex.lesson\"')"
            " FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = 'glossaryTermInfo'"
            " AND version = 0",
            [lesson],
        ).fetchone()
        scopes[lesson] = set(json.loads(text)["published_scope"])
    db.execute("CREATE TEMP TABLE covered (dataset TEXT PRIMARY KEY, fresh TEXT, volume TEXT)")
    db.executemany(
        "INSERT INTO covered VALUES (?, ?, ?)",
        [
            (
                urn,
                assertion_urn(FRESHNESS_LESSON, urn) if urn in scopes[FRESHNESS_LESSON] else None,
                assertion_urn(VOLUME_LESSON, urn) if urn in scopes[VOLUME_LESSON] else None,
            )
            for urn in set().union(*scopes.values())
        ],
    )


LATEST = (
    " LEFT JOIN metadata_aspect_v2 {alias} ON {alias}.urn = {key}"
    " AND {alias}.aspect_name = '{aspect}' AND {alias}.version = 0"
)
JOINS = "".join(
    LATEST.format(alias=alias, key=key, aspect=aspect)
    for alias, key, aspect in (
        ("op", "c.dataset", "operation"),
        ("pr", "c.dataset", "datasetProfile"),
        ("fr", "c.fresh", "assertionRunEvent"),
        ("vr", "c.volume", "assertionRunEvent"),
    )
)


def lower_bound(counts_json: str | None, max_drop: float, window: int) -> int | None:
    """The volume rule's lower bound: at most ``max_drop`` below the last counts' median."""
    counts = json.loads(counts_json or "[]")[-window:]
    if not counts:
        return None
    return math.ceil(round(statistics.median(counts) * (1 - max_drop), 6))


def hand_sql(path: Path) -> dict[str, Any]:
    """The verdicts in one SQL query (a Python function for the median)."""
    db = sqlite3.connect(path)
    db.create_function("lower_bound", 3, lower_bound, deterministic=True)
    slot = T1 - T1 % (INTERVAL_S * 1000)
    covered_table(db)
    rows = db.execute(
        "SELECT c.dataset,"
        " c.fresh IS NOT NULL AND coalesce(json_extract(fr.metadata, '$.timestampMillis'), 0) < ?"
        "  AND (json_extract(op.metadata, '$.lastUpdatedTimestamp') IS NULL"
        "   OR ? - json_extract(op.metadata, '$.lastUpdatedTimestamp') > ?) AS stale,"
        " c.volume IS NOT NULL AND json_extract(pr.metadata, '$.timestampMillis')"
        "  > coalesce(json_extract(vr.metadata, '$.timestampMillis'), 0)"
        "  AND json_extract(pr.metadata, '$.rowCount') < lower_bound("
        "   json_extract(vr.metadata, '$.result.nativeResults.row_counts'), ?, ?) AS short"
        f" FROM covered AS c{JOINS} ORDER BY c.dataset",
        [slot, T1, MAX_AGE_MS, VOLUME["max_drop"], VOLUME["window"]],
    ).fetchall()
    db.close()
    return {
        "found": {
            "stale": [urn for urn, stale, _ in rows if stale],
            "short": [urn for urn, _, short in rows if short],
        },
        "judged": len(rows),
    }


def hand_python(path: Path) -> dict[str, Any]:
    """The same rows fetched as JSON text, parsed and judged in a Python loop."""
    db = sqlite3.connect(path)
    slot = T1 - T1 % (INTERVAL_S * 1000)
    covered_table(db)
    rows = db.execute(
        "SELECT c.dataset, c.fresh, c.volume, op.metadata, pr.metadata, fr.metadata, vr.metadata"
        f" FROM covered AS c{JOINS} ORDER BY c.dataset"
    ).fetchall()
    db.close()
    found: dict[str, list[str]] = {"stale": [], "short": []}
    for dataset, fresh, volume, op, pr, fr, vr in rows:
        operation, last_fresh = json.loads(op or "null"), json.loads(fr or "null")
        if fresh and (last_fresh is None or last_fresh["timestampMillis"] < slot):
            updated = (operation or {}).get("lastUpdatedTimestamp")
            if updated is None or T1 - updated > MAX_AGE_MS:
                found["stale"].append(dataset)
        profile_, last_volume = json.loads(pr or "null"), json.loads(vr or "null")
        if (
            volume
            and profile_
            and profile_["timestampMillis"] > (last_volume or {}).get("timestampMillis", 0)
        ):
            native = ((last_volume or {}).get("result") or {}).get("nativeResults") or {}
            bound = lower_bound(native.get("row_counts"), VOLUME["max_drop"], VOLUME["window"])
            if bound is not None and profile_["rowCount"] < bound:
                found["short"].append(dataset)
    return {"found": found, "judged": len(rows)}


def hand_sql_writes(path: Path) -> dict[str, Any]:
    """``hand_sql``'s verdicts, then per judged dataset its run events (and incident B when it
    failed) written through ``LiteCatalog.emit``, one call per dataset as the sweep's
    decisions are applied."""
    from reflex_actions.executor import ControlResult
    from reflex_actions.handlers.assertions import (
        assertion_urn,
        recurrence_incident_urn,
        run_event_mcp,
    )
    from reflex_actions.handlers.own_runs import OwnRuns

    verdicts = hand_sql(path)
    stale, short = (set(verdicts["found"][kind]) for kind in ("stale", "short"))
    catalog, actor = LiteCatalog(path), ReflexConfig().service_actor
    unsealed = OwnRuns(catalog, is_own=lambda _: True)  # the embedded store names the writer
    before = rows_written(path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        profiles = dict(
            db.execute(
                "SELECT urn, json_extract(metadata, '$.rowCount') FROM metadata_aspect_v2"
                " WHERE aspect_name = 'datasetProfile' AND version = 0"
            ).fetchall()
        )
    for dataset in sorted(profiles):
        mcps = []
        for lesson, failed, time_ms, run_id in (
            (FRESHNESS_LESSON, dataset in stale, T1, "scheduled"),
            (VOLUME_LESSON, dataset in short, T1 - HOUR_MS, "profile"),
        ):
            assertion = assertion_urn(lesson, dataset)
            result = ControlResult(
                control_type="hand", control="hand", snapshot=run_id, snapshot_id=run_id,
                passed=not failed, violation_count=int(failed), violation_unit="table",
                allowed_violations=0, rows_scanned=profiles[dataset], sample=[],
                elapsed_ms=0.0,
            )  # fmt: skip
            if failed:
                mcps.append(
                    hand_incident(
                        recurrence_incident_urn(assertion, run_id),
                        dataset,
                        assertion,
                        time_ms,
                        actor,
                    )
                )
            mcps.append(
                run_event_mcp(assertion, dataset, time_ms, run_id, result, None, actor, unsealed)
            )
        catalog.emit(mcps)
    catalog.close()
    return {**verdicts, "rows": rows_written(path) - before, "written": failures_recorded(path)}


def hand_incident(urn: str, dataset: str, assertion: str, time_ms: int, actor: str) -> Any:
    from datahub.metadata.schema_classes import (
        AuditStampClass,
        IncidentSourceClass,
        IncidentSourceTypeClass,
        IncidentStateClass,
        IncidentStatusClass,
        IncidentTypeClass,
    )

    stamp = AuditStampClass(time=time_ms, actor=actor)
    info = IncidentInfoClass(
        type=IncidentTypeClass.CUSTOM,
        customType="REFLEX_RECURRENCE",
        title=f"Recurrence on {dataset}",
        entities=[dataset],
        status=IncidentStatusClass(state=IncidentStateClass.ACTIVE, lastUpdated=stamp),
        source=IncidentSourceClass(
            type=IncidentSourceTypeClass.ASSERTION_FAILURE, sourceUrn=assertion
        ),
        startedAt=time_ms,
        created=stamp,
    )
    return acting_as(actor, urn, info)


RUNNERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "reflex": reflex,
    "hand_sql": hand_sql,
    "hand_python": hand_python,
    "hand_sql_writes": hand_sql_writes,
}


def worker(name: str, store: Path, one_duckdb: bool) -> dict[str, Any]:
    """Run one approach once in this (fresh) process on a private copy of ``store``."""
    import reflex_actions.handlers.scheduled  # noqa: F401  (imported off the clock)

    patch = one_duckdb_database() if one_duckdb else contextlib.nullcontext()
    with patch, store_copy(store) as copy:
        Path(copy).read_bytes()  # warm the page cache
        baseline_rss = max_rss_mb()
        if name == "reflex":
            report = reflex(copy)
        else:
            report, measured = timed(lambda: RUNNERS[name](copy))
            report = {**report, **measured}
    return {"approach": name, "baseline_rss_mb": baseline_rss, **report}


# --- driver -------------------------------------------------------------------------------------


def check(name: str, report: dict[str, Any], expected: dict[str, list[str]]) -> None:
    """Exactly the planted datasets fail; Reflex's counts and writes agree."""
    assert report["found"] == expected, (
        f"{name}: found {[(k, len(v)) for k, v in report['found'].items()]}"
    )
    n_failed = len(expected["stale"]) + len(expected["short"])
    if name == "reflex":
        assert report["again"]["counts"]["judged"] == 0 and report["again"]["rows"] == 0, report[
            "again"
        ]
        assert report["counts"]["errors"] == 0, report["counts"]
    if name == "hand_sql_writes":
        assert report["written"] == expected, f"{name} wrote other incidents"
        assert report["rows"] >= 2 * n_failed, report["rows"]


def profile_sweep(store: Path) -> str:
    """cProfile of one cold sweep (in this process), top functions by own time."""
    from reflex_actions.handlers.scheduled import on_schedule

    with store_copy(store) as copy:
        ctx = sweep_context(copy)
        profiler = cProfile.Profile()
        profiler.runcall(on_schedule, ctx, T1, INTERVAL_S)
        ctx.catalog.close()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(15)
    stats.sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def benchmark(
    store: Path, n: int, repeat: int, max_wait: float, one_duckdb: bool, build: dict[str, Any]
) -> dict[str, Any]:
    expected = planted(n)
    runs = [*APPROACHES, *(["reflex_one_duckdb"] if one_duckdb else [])]

    def run(name: str) -> dict[str, Any]:
        report = spawn(name, store, __file__)
        check(name, report, expected)
        return report

    reports, rounds, load_after = interleaved_rounds(runs, repeat, max_wait, run, width=18)
    summaries = {name: run_stats(rs) for name, rs in reports.items()}
    again = {
        name: statistics.median(r["again"]["seconds"] for r in reports[name])
        for name in runs
        if name.startswith("reflex")
    }
    hand = min(HAND, key=lambda name: summaries[name]["seconds"])
    reflex_s = summaries["reflex"]
    figures = ("seconds", "best_seconds", "cpu_seconds")
    result = {
        "benchmark": "schedule_sweep",
        "datasets": n,
        "controls": 2 * n,
        "planted": {kind: len(urns) for kind, urns in expected.items()},
        "repeat": repeat,
        "store_mb": round(store.stat().st_size / 1024**2, 1),
        "build": build,
        "counts": reports["reflex"][0]["counts"],
        "rows_written": {
            name: reports[name][0]["rows"] for name in runs if "rows" in reports[name][0]
        },
        "hand_query": hand,
        "median_seconds": {name: round(s["seconds"], 3) for name, s in summaries.items()},
        "best_seconds": {name: round(s["best_seconds"], 3) for name, s in summaries.items()},
        "median_cpu_seconds": {name: round(s["cpu_seconds"], 3) for name, s in summaries.items()},
        "runs_seconds": {name: s["runs"] for name, s in summaries.items()},
        "ms_per_dataset": {
            name: round(s["seconds"] * 1000 / n, 3) for name, s in summaries.items()
        },
        "second_sweep": {
            name: {
                "median_seconds": round(s, 3),
                "ms_per_dataset": round(s * 1000 / n, 3),
            }
            for name, s in again.items()
        },
        "peak_rss_mb": {name: round(s["peak_rss_mb"]) for name, s in summaries.items()},
        "baseline_rss_mb": {name: round(s["baseline_rss_mb"]) for name, s in summaries.items()},
        "ratios": {
            f"reflex_vs_{other}{suffix}": ratio(reflex_s[key], summaries[other][key])
            for other in (hand, "hand_sql_writes", *(["reflex_one_duckdb"] if one_duckdb else []))
            for key, suffix in zip(figures, ("", "_best", "_cpu"), strict=True)
        },
        "load_average": {
            "before": rounds[0]["load"],
            "after": load_after,
            "waited_seconds": rounds[0]["waited_seconds"],
            "rounds": [r["load"] for r in rounds],
        },
        "machine": {**machine_info("acryl-datahub", "duckdb"), "sqlite": sqlite3.sqlite_version},
    }
    return result


def print_table(result: dict[str, Any]) -> None:
    n = result["datasets"]
    print(
        f"\nschedule sweep over {n:,} datasets ({result['controls']:,} controls; planted "
        f"{result['planted']}), {result['repeat']} fresh-process runs; counts {result['counts']}"
    )
    header = ("median s", "best s", "cpu s", "ms/dataset", "peak RSS MB")
    print(f"{'approach':<20}" + "".join(f"{column:>12}" for column in header))
    for name, seconds in result["median_seconds"].items():
        print(
            f"{name:<20}{seconds:>12.2f}{result['best_seconds'][name]:>12.2f}"
            f"{result['median_cpu_seconds'][name]:>12.2f}{result['ms_per_dataset'][name]:>12.3f}"
            f"{result['peak_rss_mb'][name]:>12}"
        )
    for name, again in result["second_sweep"].items():
        print(
            f"{name} second sweep (nothing due): {again['median_seconds']:.2f} s, "
            f"{again['ms_per_dataset']:.3f} ms/dataset"
        )
    for key, value in result["ratios"].items():
        print(f"{key}: {value:.2f}x")
    print_load(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=BENCH_DIR / "data")
    parser.add_argument("--max-wait", type=float, default=300.0, help="seconds to wait for quiet")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--profile", action="store_true", help="cProfile one cold sweep")
    parser.add_argument(
        "--one-duckdb", action="store_true",
        help="also time the sweep with one DuckDB database for every judgement (experiment)",
    )  # fmt: skip
    parser.add_argument(
        "--worker", choices=[*APPROACHES, "reflex_one_duckdb"], help=argparse.SUPPRESS
    )
    parser.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        name = args.worker.removesuffix("_one_duckdb")
        report = worker(name, args.snapshot, one_duckdb=args.worker != name)
        print(json.dumps({**report, "approach": args.worker}))
        return
    store, build = ensure_store(args.data_dir, args.datasets, args.rebuild)
    result = benchmark(store, args.datasets, args.repeat, args.max_wait, args.one_duckdb, build)
    print_table(result)
    if args.profile:
        with bench_lock():
            print(profile_sweep(store))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
