"""What a backtest does per snapshot beyond the control's own query (issue 27): counted, not
timed, and its report the same as when every file is read on its own."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from reflex_actions import snapshots
from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.engine import embedded_engine
from reflex_actions.backtest.metrics import BacktestReport
from reflex_actions.controls.not_null import NotNullControl
from reflex_actions.controls.values import ValueRangeControl
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.snapshots import SnapshotFile
from tests.conformance.dialect_rendering import RecordingEngine as QueryRecorder
from tests.conftest import write_snapshot

NOT_NULL = NotNullControl(field="account_id")
IN_RANGE = ValueRangeControl(field="amount", min=0, max=100)


def rows(n: int, nulls: int = 0, amount: Any = 5.0) -> list[dict[str, Any]]:
    return [
        {"txn": f"t{i}", "account_id": None if i < nulls else i, "amount": amount} for i in range(n)
    ]


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """Ten Parquet days of one schema, two of them with NULLs; then a day whose ``amount`` is
    text, a drifted day and a CSV day."""
    folder = tmp_path / "finance.payments"
    for day in range(1, 11):
        write_snapshot(folder / f"2026-09-{day:02d}.parquet", rows(20, nulls=2 * (day in (3, 7))))
    write_snapshot(folder / "2026-09-11.parquet", rows(20, amount="500"))
    write_snapshot(folder / "2026-09-12.parquet", [{"txn": "x"}])
    write_snapshot(folder / "2026-09-13.csv", rows(20, nulls=1))
    return folder


@pytest.fixture
def described(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files a DESCRIBE read the schema of, in order."""
    files: list[Path] = []
    original = SnapshotFile.column_types

    def recording(self: SnapshotFile, connection: Any) -> dict[str, str]:
        files.append(self.path)
        return original(self, connection)

    monkeypatch.setattr(SnapshotFile, "column_types", recording)
    return files


def outcomes(report: BacktestReport) -> list[dict[str, Any]]:
    return [outcome.model_dump() for outcome in report.per_snapshot]


def each_file_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing read ahead: every file described on its own, as before issue 27."""
    monkeypatch.setattr(DuckDBEngine, "reading_ahead", lambda self, targets, types=True: self)


@pytest.mark.parametrize("control", [NOT_NULL, IN_RANGE], ids=["not_null", "value_range"])
def test_one_describe_per_schema_and_the_report_of_describing_every_file(
    history: Path, described: list[Path], monkeypatch: pytest.MonkeyPatch, control: Any
) -> None:
    report = backtest(control, [load_history(history)])
    # the ten days of one schema are described once; the text-amount and drifted days (a
    # schema each) and the CSV day (sniffed, never read ahead) on their own
    assert len(described) == 4
    assert {path.name for path in described[1:]} == {
        "2026-09-11.parquet",
        "2026-09-12.parquet",
        "2026-09-13.csv",
    }
    drifted = report.per_snapshot[11]
    assert not drifted.evaluable and "schema drift" in (drifted.reason or "")
    described.clear()
    each_file_on_its_own(monkeypatch)
    assert outcomes(backtest(control, [load_history(history)])) == outcomes(report)
    assert len(described) == 13


def test_a_file_read_ahead_is_found_and_resolved_once(
    history: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A point whose file was read ahead is not looked up again (two stats and a resolve each):
    only the CSV day is; and no file's DuckDB pattern is made twice."""
    loaded = load_history(history)
    found: list[Path] = []
    patterns: list[Path] = []
    make_pattern = snapshots.exact_file_pattern

    def recording_pattern(path: Path) -> str:
        patterns.append(path)
        return make_pattern(path)

    monkeypatch.setattr(snapshots, "exact_file_pattern", recording_pattern)
    original = SnapshotFile.from_path.__func__  # type: ignore[attr-defined]

    def recording(cls: type[SnapshotFile], path: Any) -> SnapshotFile:
        found.append(Path(path))
        return original(cls, path)

    monkeypatch.setattr(SnapshotFile, "from_path", classmethod(recording))
    report = backtest(NOT_NULL, [loaded])
    assert [path.name for path in found] == ["2026-09-13.csv"]
    assert len(patterns) == len(set(patterns)) == 13
    assert sum(outcome.evaluable for outcome in report.per_snapshot) == 12


def test_a_changed_type_is_judged_by_its_own_schema(history: Path) -> None:
    """The text ``amount`` of one day is read as text (its '500' out of range), the DOUBLE
    days natively: the types read ahead are each file's own."""
    by_id = {o.snapshot_id: o for o in backtest(IN_RANGE, [load_history(history)]).per_snapshot}
    assert by_id["2026-09-11"].violation_count == 20
    assert by_id["2026-09-11"].sample == [{"value": "500", "occurrences": 20}]
    assert by_id["2026-09-10"].violation_count == 0


def test_an_unreadable_footer_leaves_every_file_to_be_read_on_its_own(
    history: Path, described: list[Path]
) -> None:
    (history / "2026-09-14.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    report = backtest(NOT_NULL, [load_history(history)])
    assert len(described) == 14
    assert "2026-09-14.parquet" in (report.per_snapshot[-1].reason or "")


class RecordingEngine(QueryRecorder):
    """The DuckDB engine recording every query it runs; its worker records into the same list
    (one worker: it shares the connection)."""

    def worker(self) -> RecordingEngine:
        return copy.copy(self)


@pytest.mark.parametrize(
    ("control", "failing", "extra"),
    [(NOT_NULL, 3, 3), (IN_RANGE, 1, 0)],
    ids=["not_null", "value_range"],
)
def test_one_query_a_snapshot_but_the_sample_of_a_failing_one(
    history: Path, control: Any, failing: int, extra: int
) -> None:
    """A passing snapshot costs one query (its schema read ahead), a failing one its sample
    too. A control whose sample carries its
    violations runs that alone, pass or fail: the footer read ahead gives its row count (the
    CSV day, no footer, counts rows and violations in one query)."""
    engine = RecordingEngine()
    try:
        report = backtest(control, [load_history(history)], engine=engine, workers=1)
    finally:
        engine.close()
    evaluable = sum(outcome.evaluable for outcome in report.per_snapshot)
    assert sum(bool(outcome.flagged) for outcome in report.per_snapshot) == failing
    assert len(engine.fetched) == evaluable + extra


def test_the_embedded_engine_parses_a_footer_once() -> None:
    """Its database keeps the Parquet footers it read (the read-ahead's), for each file's own
    query."""
    with embedded_engine() as engine:
        assert engine.fetch("SELECT current_setting('parquet_metadata_cache')", {}) == [(True,)]
