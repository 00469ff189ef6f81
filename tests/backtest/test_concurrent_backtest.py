"""A backtest judges each snapshot on its own, several at once, exactly as ``run_control`` would."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import tests.conformance
import tests.kinds
from reflex_actions.backtest import BacktestReport, History, backtest, engine, load_history
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.engines.base import Engine
from reflex_actions.errors import ReflexError, SnapshotError
from reflex_actions.executor import ReferenceSnapshot, run_control
from reflex_actions.testing.cases import hostile_names, rows_as
from reflex_actions.testing.kind_suite import kind_suites
from tests.conformance.control_cases import ControlCase
from tests.conftest import write_snapshot
from tests.kinds import conftest as kinds_conftest

#: The test package's plugin kinds (its cases are among the conformance cases), installed per test.
install_kinds = kinds_conftest.install_kinds

for _package in (tests.conformance, tests.kinds):
    for _module in pkgutil.iter_modules(_package.__path__):
        if _module.name.startswith("test_"):
            importlib.import_module(f"{_package.__name__}.{_module.name}")
CASES = {suite.control_case.type_name: suite.control_case for suite in kind_suites()}

TXN = UniquenessControl(field="transaction_id")
#: A file DuckDB cannot read: not evaluable, with DuckDB's reason.
CORRUPT = b"PAR1 not really parquet PAR1"


def txn_history(folder: Path, snapshots: int) -> History:
    for day in range(1, snapshots + 1):
        rows = [{"transaction_id": f"t{i}"} for i in range(day)]
        write_snapshot(folder / f"2026-03-{day:02d}.parquet", rows + rows[: day % 3])
    return load_history(folder)


def case_histories(
    tmp_path: Path, case: ControlCase, names: dict[str, str], control: Control
) -> tuple[History, dict[str, History]]:
    """Passing and failing snapshots in Parquet and CSV, an unreadable one and one without
    the control's columns; for a referencing control, a parent history paired by date."""
    folder = tmp_path / "child"
    for snapshot, rows in (
        ("2026-01-01.parquet", case.passing_rows),
        ("2026-01-02.csv", case.failing_rows),
        ("2026-01-03.parquet", case.failing_rows),
        ("2026-01-05.csv", case.passing_rows),
        ("2026-01-06.parquet", case.passing_rows),
    ):
        write_snapshot(folder / snapshot, rows_as(rows, names))
    (folder / "2026-01-04.parquet").write_bytes(CORRUPT)
    write_snapshot(folder / "2026-01-07.parquet", [{"unrelated column": 1}])
    (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": ["2026-01-02"]}))
    references = {}
    if (target := control.referenced()) is not None:
        parent = tmp_path / "parent"
        for snapshot in ("2026-01-01.parquet", "2026-01-03.csv"):
            write_snapshot(parent / snapshot, rows_as(case.reference_rows, names))
        references[target.dataset] = load_history(parent)
    return load_history(folder), references


def expected_by_run_control(
    control: Control, history: History, references: dict[str, History]
) -> list[dict[str, Any]]:
    """What ``run_control`` says of each snapshot, in order, as landing runs would have run it:
    against the paired parent snapshot, the counts of the evaluable snapshots before it and
    as of the time it was taken."""
    target = control.referenced()
    parent = references[target.dataset] if target else None
    counts: list[int] = []
    expected = []
    for snapshot in history.snapshots:
        paired = parent.snapshot_for(snapshot.snapshot_id) if parent else None
        try:
            result = run_control(
                control,
                snapshot.path,
                sample_size=engine.DEFAULT_SAMPLE_SIZE,
                reference=ReferenceSnapshot(*paired) if paired else None,
                earlier_counts=counts,
                as_of_ms=history.as_of_ms(snapshot.snapshot_id) if control.judged_as_of else None,
            )
        except SnapshotError as error:
            expected.append({"evaluable": False, "reason": str(error)})
            continue
        counts.append(result.rows_scanned)
        expected.append(
            {
                "evaluable": True,
                "flagged": not result.passed,
                "rows_scanned": result.rows_scanned,
                "violation_count": result.violation_count,
                "sample": result.sample,
                "measures": result.measures,
            }
        )
    return expected


def as_judged(report: BacktestReport) -> list[dict[str, Any]]:
    judged = []
    for outcome in report.per_snapshot:
        if not outcome.evaluable:
            judged.append({"evaluable": False, "reason": outcome.reason})
            continue
        judged.append(
            {
                "evaluable": True,
                "flagged": outcome.flagged,
                "rows_scanned": outcome.rows_scanned,
                "violation_count": outcome.violation_count,
                "sample": outcome.sample,
                "measures": outcome.measures,
            }
        )
    return judged


@pytest.mark.parametrize("naming", ["plain", "hostile"])
@pytest.mark.parametrize("type_name", sorted(CASES))
def test_every_snapshot_is_judged_as_run_control_judges_it(
    tmp_path: Path, install_kinds: Callable[[str], None], type_name: str, naming: str
) -> None:
    install_kinds(kinds_conftest.ENTRY_POINT)
    case = CASES[type_name]
    names = case.columns if naming == "plain" else hostile_names(case)
    control = parse_control_spec(case.make_spec(names))
    history, references = case_histories(tmp_path, case, names, control)
    report = backtest(control, [history], references=references, workers=3)
    expected = expected_by_run_control(control, history, references)
    assert [o.snapshot_id for o in report.per_snapshot] == [
        s.snapshot_id for s in history.snapshots
    ]
    assert as_judged(report) == expected
    assert any(e["evaluable"] and e["flagged"] for e in expected)  # the case's failure is seen
    assert "cannot read snapshot" in expected[3]["reason"]  # 2026-01-04: the unreadable file


def corrupt_data(path: Path) -> None:
    """Overwrite a Parquet file's first data page: its footer still reads, its data does not."""
    rows = [{"transaction_id": f"t{i}"} for i in range(5000)]
    pq.write_table(pa.Table.from_pylist(rows), path, compression="snappy", use_dictionary=False)
    data = bytearray(path.read_bytes())
    data[200:3000] = b"\xab" * 2800
    path.write_bytes(bytes(data))


def test_files_duckdb_fails_on_are_not_evaluable_alone_with_its_reason(tmp_path: Path) -> None:
    history = txn_history(tmp_path / "payments", 6)
    corrupt_data(history.snapshots[1].path)  # its schema reads; its data fails
    history.snapshots[4].path.write_bytes(CORRUPT)  # not even its schema reads
    report = backtest(TXN, [history], workers=2)
    assert [o.evaluable for o in report.per_snapshot] == [True, False, True, True, False, True]
    data_fails, schema_fails = report.per_snapshot[1], report.per_snapshot[4]
    assert data_fails.reason == (
        f"cannot evaluate snapshot {data_fails.path}: Invalid Input Error: Failed to read file "
        f'"{history.snapshots[1].read_path}": Snappy decompression failure'
    )
    assert schema_fails.reason.startswith(f"cannot read snapshot {schema_fails.path}: ")
    assert [o.rows_scanned for o in report.per_snapshot if o.evaluable] == [2, 3, 5, 6]


def recorded_judge(monkeypatch: pytest.MonkeyPatch, before: Any = None) -> dict[str, Any]:
    """Wrap each snapshot's judgement, recording how many run at once and on which cursors;
    ``before(cursor, judgement)`` runs first in the worker."""
    seen: dict[str, Any] = {"active": 0, "most": 0, "cursors": {}}
    lock = threading.Lock()
    judge = engine._judge

    def recording(con: duckdb.DuckDBPyConnection, control: Control, judgement: Any, *rest: Any):
        with lock:
            seen["active"] += 1
            seen["most"] = max(seen["most"], seen["active"])
            seen["cursors"][id(con)] = con
        try:
            if before is not None:
                before(con, judgement)
            return judge(con, control, judgement, *rest)
        finally:
            with lock:
                seen["active"] -= 1

    monkeypatch.setattr(engine, "_judge", recording)
    return seen


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_at_most_workers_snapshots_are_judged_at_once_each_on_its_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    history = txn_history(tmp_path / "payments", 4 * workers)
    together = threading.Barrier(workers, timeout=30)  # passes only with `workers` at once
    seen = recorded_judge(monkeypatch, before=lambda con, judgement: together.wait())
    report = backtest(TXN, [history], workers=workers)
    assert seen["most"] == workers
    assert len(seen["cursors"]) == workers
    assert [o.snapshot_id for o in report.per_snapshot] == [
        s.snapshot_id for s in history.snapshots
    ]
    assert all(o.evaluable for o in report.per_snapshot)


def test_outcomes_keep_history_order_whatever_finishes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = txn_history(tmp_path / "payments", 6)
    first = history.snapshots[0].snapshot_id
    others_done = threading.Semaphore(0)

    def first_finishes_last(con: duckdb.DuckDBPyConnection, judgement: Any) -> None:
        if judgement.snapshot.snapshot_id == first:
            for _ in history.snapshots[1:]:
                assert others_done.acquire(timeout=30)

    judge = engine._judge

    def judged_then_released(*args: Any) -> Any:
        try:
            return judge(*args)
        finally:
            if args[2].snapshot.snapshot_id != first:
                others_done.release()

    monkeypatch.setattr(engine, "_judge", judged_then_released)
    seen = recorded_judge(monkeypatch, before=first_finishes_last)
    fractions: list[float] = []
    report = backtest(
        TXN, [history], workers=2, progress=lambda dataset, fraction: fractions.append(fraction)
    )
    assert seen["most"] == 2
    assert [o.snapshot_id for o in report.per_snapshot] == [
        s.snapshot_id for s in history.snapshots
    ]
    assert [o.rows_scanned for o in report.per_snapshot] == [d + d % 3 for d in range(1, 7)]
    assert fractions == [done / 6 for done in range(1, 7)]


@pytest.mark.parametrize(
    "spec", [{"type": "uniqueness", "field": "transaction_id"}, {"type": "volume", "max_drop": 0.5}]
)
def test_the_memory_limit_and_spill_folder_hold_on_every_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any]
) -> None:
    history = txn_history(tmp_path / "payments", 6)
    settings: set[tuple[str, str]] = set()

    def read_settings(con: Engine, judgement: Any) -> None:
        query = "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        settings.add(con.fetch(query, {})[0])

    recorded_judge(monkeypatch, before=read_settings)
    in_batches = engine._judged_in_batches

    def batched_reading_settings(con: Engine, *rest: Any) -> Any:
        read_settings(con, None)  # a volume control's points judged at once, on this one
        return in_batches(con, *rest)

    monkeypatch.setattr(engine, "_judged_in_batches", batched_reading_settings)
    backtest(parse_control_spec(spec), [history], memory_limit="123MB", workers=3)
    expected_limit = (
        duckdb.connect(config={"memory_limit": "123MB"})
        .execute("SELECT current_setting('memory_limit')")
        .fetchone()[0]
    )
    assert len(settings) == 1, settings  # one database: the same limit and spill folder
    ((limit, spill_dir),) = settings
    assert limit == expected_limit
    assert Path(spill_dir).name.startswith("reflex-backtest-")
    assert not Path(spill_dir).exists()  # removed after the backtest


@pytest.mark.parametrize("at_once", [True, False], ids=["footer counts at once", "one by one"])
def test_a_volume_control_is_judged_in_order_against_earlier_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at_once: bool
) -> None:
    """Judged on its footers' counts, every point in one query; else one point after another
    (the same report either way)."""
    history = txn_history(tmp_path / "payments", 6)
    if not at_once:
        monkeypatch.setattr(engine, "_judged_in_batches", lambda *args: None)
    seen = recorded_judge(monkeypatch)
    report = backtest(parse_control_spec({"type": "volume", "max_drop": 0.5}), [history], workers=3)
    assert seen["most"] == (0 if at_once else 1)
    assert as_judged(report) == expected_by_run_control(
        parse_control_spec({"type": "volume", "max_drop": 0.5}), history, {}
    )


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_workers_must_be_a_whole_number_of_at_least_one(tmp_path: Path, workers: Any) -> None:
    history = txn_history(tmp_path / "payments", 1)
    with pytest.raises(ReflexError, match="workers must be a whole number of at least 1"):
        backtest(TXN, [history], workers=workers)
