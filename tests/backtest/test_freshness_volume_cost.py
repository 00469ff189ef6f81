"""Freshness and volume backtests (issue 27): what they run per snapshot, counted and read
from DuckDB's plans, not timed; and their answers the same as the row-by-row query's."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import duckdb
import pytest

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest import engine as backtest_engine
from reflex_actions.controls.freshness import FreshnessControl
from reflex_actions.controls.not_null import NotNullControl
from reflex_actions.controls.volume import VolumeControl
from reflex_actions.engines import duckdb as duckdb_engine
from reflex_actions.engines.base import FileTarget
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.engines.rendering import rendered
from reflex_actions.executor import run_control
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.times import parse_instant
from tests.conformance.dialect_rendering import RecordingEngine as QueryRecorder
from tests.conftest import write_snapshot

#: the column's type as the file stores it -> a DuckDB expression of a time of that type
TYPES = {
    "TIMESTAMP": "CAST({t} AS TIMESTAMP)",
    "TIMESTAMP_NS": "CAST({t} AS TIMESTAMP_NS)",
    "TIMESTAMPTZ": "CAST({t} || '+00' AS TIMESTAMPTZ)",
    "DATE": "CAST(CAST({t} AS TIMESTAMP) AS DATE)",
}


def write_times(path: Path, kind: str, times: list[str | None]) -> Path:
    """A Parquet file of one column ``ts`` of ``kind`` holding ``times`` (None: NULL)."""
    values = ", ".join("(NULL)" if t is None else f"('{t}')" for t in times) or "(NULL)"
    where = "" if times else "WHERE false"
    expression = TYPES[kind].format(t="t")
    con = duckdb.connect()
    try:
        con.execute(
            f"COPY (SELECT {expression} AS ts FROM (VALUES {values}) v(t) {where}) "
            f"TO '{path}' (FORMAT parquet)"
        )
    finally:
        con.close()
    return path


#: as of 2026-03-01 12:00Z, with the default 1h tolerance: the latest time kept is 13:00:00.000
AS_OF = "2026-03-01T12:00:00Z"
CASES = {
    "fresh": ["2026-03-01 11:00:00", "2026-02-27 00:00:00", None],
    "stale": ["2026-02-20 00:00:00"],
    "at the latest kept millisecond": ["2026-03-01 13:00:00.000999", "2026-02-01 00:00:00"],
    "one millisecond beyond": ["2026-03-01 13:00:00.001", "2026-03-01 10:00:00"],
    "open ends beside real times": ["2200-12-31 00:00:00", "2026-03-01 09:00:00", None],
    "only open ends": ["2200-12-31 00:00:00", "2200-12-31 00:00:00"],
    "only NULLs": [None, None],
    "no rows": [],
    "before the epoch": ["1960-01-01 00:00:00.0005", "1969-12-31 23:59:59.9995"],
}


def without_settling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row converted and compared, as before issue 27 (no settled query)."""
    monkeypatch.setattr(FreshnessControl, "_newest_stored_ms", lambda self, relation: None)


@pytest.mark.parametrize("kind", list(TYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_the_newest_stored_value_gives_the_row_by_row_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, case: str
) -> None:
    snapshot = write_times(tmp_path / "s.parquet", kind, CASES[case])
    control = FreshnessControl(timestamp_field="ts", max_age="1d")
    as_of = parse_instant(AS_OF)
    settled = run_control(control, snapshot, as_of_ms=as_of).model_dump(exclude={"elapsed_ms"})
    without_settling(monkeypatch)
    every_row = run_control(control, snapshot, as_of_ms=as_of).model_dump(exclude={"elapsed_ms"})
    assert settled == every_row


def plan(engine: DuckDBEngine, sql: str, params: dict[str, Any]) -> str:
    return "\n".join(str(row[-1]) for row in engine.fetch(f"EXPLAIN {sql}", params))


@pytest.mark.parametrize("kind", list(TYPES))
def test_the_settled_query_converts_no_row_on_parquet(tmp_path: Path, kind: str) -> None:
    """Its plan reads the column's newest value from the footer's statistics (no scan of the
    file, no conversion of a row); the counts query it stands in for converts every row."""
    snapshot = write_times(tmp_path / "s.parquet", kind, ["2026-03-01 11:00:00", None])
    control = FreshnessControl(timestamp_field="ts", max_age="1d")
    engine = DuckDBEngine()
    try:
        from dataclasses import replace

        relation = replace(
            engine.relation(FileTarget(snapshot), ["ts"]), as_of_ms=parse_instant(AS_OF)
        )
        query = rendered(control, relation, 3, engine.dialect)
        assert query.settled is not None
        settled = plan(engine, query.settled.sql, query.settled.bind(relation, query.params))
        counts = plan(engine, query.counts.sql, query.counts.bind(relation, query.params))
    finally:
        engine.close()
    assert "READ_PARQUET" not in settled.upper() and "COLUMN DATA SCAN" in settled.upper()
    assert "READ_PARQUET" in counts.upper() and "time_ms" in counts


def test_text_times_have_no_settled_query(tmp_path: Path) -> None:
    """Text is read as a time row by row (its newest text need not be its newest time)."""
    snapshot = tmp_path / "s.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT '2026-03-01 11:00' AS ts) TO '{snapshot}' (FORMAT parquet)")
    con.close()
    engine = DuckDBEngine()
    try:
        relation = engine.relation(FileTarget(snapshot), ["ts"])
        control = FreshnessControl(timestamp_field="ts", max_age="1d")
        assert control.compile(relation).settled is None
    finally:
        engine.close()


class RecordingEngine(QueryRecorder):
    """The DuckDB engine recording every query it runs, its workers into the same list."""

    def worker(self) -> RecordingEngine:
        return copy.copy(self)


def daily(folder: Path, days: int, open_end_on: int | None = None) -> Path:
    folder.mkdir()
    for day in range(1, days + 1):
        times = [f"2026-03-{day:02d} 08:00:00", None]
        if day == open_end_on:
            times.append("9999-12-31 00:00:00")
        write_times(folder / f"2026-03-{day:02d}.parquet", "TIMESTAMP", times)
    return folder


def test_a_freshness_backtest_runs_one_query_a_snapshot_converting_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each snapshot's settled query answers it; a snapshot holding a time beyond the
    tolerance is judged row by row as well. The report is the row-by-row one."""
    history = load_history(daily(tmp_path / "finance.payments", 6, open_end_on=4))
    control = FreshnessControl(timestamp_field="ts", max_age="1d")
    engine = RecordingEngine()
    try:
        report = backtest(control, [history], engine=engine, workers=1)
    finally:
        engine.close()
    judged = [sql for sql in engine.fetched if "snapshot" in sql]
    assert len(judged) == 6 + 1
    assert sum("time_ms" in sql for sql in judged) == 1  # the open-ended day's own
    assert report.per_snapshot[3].measures["future_values_ignored"] == 1  # type: ignore[index]
    without_settling(monkeypatch)
    every_row = backtest(control, [history], workers=1)
    ignored = {"elapsed_ms"}
    assert [o.model_dump(exclude=ignored) for o in report.per_snapshot] == [
        o.model_dump(exclude=ignored) for o in every_row.per_snapshot
    ]


def volume_history(folder: Path) -> Path:
    """Ten Parquet days, the sixth short; a CSV day (no footer), then a Parquet day."""
    folder.mkdir()
    for day in range(1, 11):
        n = 4 if day == 6 else 20
        write_snapshot(folder / f"2026-09-{day:02d}.parquet", [{"txn": f"t{i}"} for i in range(n)])
    write_snapshot(folder / "2026-09-11.csv", [{"txn": "x"}] * 5)
    write_snapshot(folder / "2026-09-12.parquet", [{"txn": f"t{i}"} for i in range(20)])
    return folder


@pytest.mark.parametrize(
    ("control", "queries"),
    [(VolumeControl(min_rows=10), 12), (VolumeControl(max_drop=0.5, window=3), 2)],
    ids=["absolute, each in the pool", "relative, at once"],
)
def test_a_volume_backtest_judges_its_footers_counts_in_one_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, control: VolumeControl, queries: int
) -> None:
    """Judged in order (a relative bound), the Parquet days' counts come from their footers,
    read ahead: one query judges them all (reading no rows); the CSV day is counted by a query
    of its own, in its turn (the bound of each day after it counts it). Independent points
    (absolute bounds) not all counted by footers are judged several at once, each on its own.
    The report is the one-by-one report."""
    history = load_history(volume_history(tmp_path / "finance.payments"))
    engine = RecordingEngine()
    try:
        report = backtest(control, [history], engine=engine, workers=1)  # one connection
    finally:
        engine.close()
    assert len(engine.fetched) == queries  # at once: the batch and the CSV day's count
    assert sum("reflex_batch" in sql for sql in engine.fetched) == (queries == 2)
    assert [o.snapshot_id for o in report.per_snapshot if o.flagged] == ["2026-09-06", "2026-09-11"]
    assert [o.rows_scanned for o in report.per_snapshot[-2:]] == [5, 20]
    monkeypatch.setattr(backtest_engine, "_judged_in_batches", lambda *args: None)
    one_by_one = backtest(control, [history], workers=2)
    ignored = {"elapsed_ms"}
    assert [o.model_dump(exclude=ignored) for o in report.per_snapshot] == [
        o.model_dump(exclude=ignored) for o in one_by_one.per_snapshot
    ]


def test_a_volume_backtest_reads_no_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Judged on row counts alone, it reads the footers' counts ahead and no column types
    (no DESCRIBE, no Parquet schema); a control reading a column describes its schema once."""
    folder = volume_history(tmp_path / "finance.payments")
    (folder / "2026-09-11.csv").unlink()
    described: list[Path] = []
    original = SnapshotFile.column_types

    def recording(self: SnapshotFile, connection: Any) -> dict[str, str]:
        described.append(self.path)
        return original(self, connection)

    monkeypatch.setattr(SnapshotFile, "column_types", recording)
    read = []
    real = duckdb_engine.read_ahead
    monkeypatch.setattr(
        duckdb_engine,
        "read_ahead",
        lambda con, files, types=True: read.append(types) or real(con, files, types),
    )
    engine = RecordingEngine()
    try:
        report = backtest(
            VolumeControl(min_rows=10), [load_history(folder)], engine=engine, workers=1
        )
    finally:
        engine.close()
    assert (described, read) == ([], [False])
    assert len(engine.fetched) == 1 and "reflex_batch" in engine.fetched[0]  # every day at once
    assert [o.rows_scanned for o in report.per_snapshot][4:7] == [20, 4, 20]
    backtest(NotNullControl(field="txn"), [load_history(folder)])
    assert (len(described), read) == (1, [False, True])
