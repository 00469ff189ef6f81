"""Runs given no engine share the process's embedded DuckDB database, one cursor each: a
landing judges every covered control without opening a database per control, and reads each
file anew."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from reflex_actions import executor
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.executor import run_control
from tests.conftest import write_snapshot

TXN = UniquenessControl(field="transaction_id")


def rows(*ids: str) -> list[dict[str, Any]]:
    return [{"transaction_id": transaction} for transaction in ids]


def test_runs_without_an_engine_open_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[int] = []
    real = duckdb.connect

    def counted(*args: Any, **kwargs: Any) -> duckdb.DuckDBPyConnection:
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(executor, "_IN_MEMORY", [])
    monkeypatch.setattr(duckdb, "connect", counted)
    clean = write_snapshot(tmp_path / "a.parquet", rows("t1", "t2"))
    duplicated = write_snapshot(tmp_path / "b.csv", rows("t1", "t1"))

    results = [run_control(TXN, path) for path in (clean, duplicated, clean)]

    assert [result.passed for result in results] == [True, False, True]
    assert len(opened) == 1


def test_a_file_rewritten_in_place_is_read_anew(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "day.parquet", rows("t1", "t2"))
    assert run_control(TXN, path).passed
    write_snapshot(path, rows("t1", "t1", "t2"))  # the same name, new contents
    again = run_control(TXN, path)
    assert (again.passed, again.violation_count, again.rows_scanned) == (False, 1, 3)
