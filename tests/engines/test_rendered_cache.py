"""A control is compiled and rendered once per shape of what it reads: a backtest judges
hundreds of snapshots that differ only in the file bound, and another shape (other column
types, a CSV's text) is compiled anew, never served another's SQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.engines import rendering
from reflex_actions.engines.base import FileTarget
from reflex_actions.engines.duckdb import DuckDBEngine
from tests.conftest import write_snapshot
from tests.engines.compiles import count_compiles


def test_snapshots_of_one_shape_compile_once_and_another_shape_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = count_compiles(monkeypatch)
    monkeypatch.setattr(rendering, "_RENDERED", {})
    control = UniquenessControl(field="k")
    engine = DuckDBEngine()
    try:
        results = []
        for name, rows in (("a", [1, 1, 2]), ("b", [3, 4, 4, 4]), ("c", [5])):
            path = write_snapshot(tmp_path / f"{name}.parquet", [{"k": k} for k in rows])
            relation = engine.relation(FileTarget(path), ["k"])
            results.append(engine.evaluate(control, relation, 5).violation_count)
        assert results == [1, 2, 0]  # each file's own rows, though compiled once
        assert compiled == [False]
        as_text = write_snapshot(tmp_path / "d.csv", [{"k": "x"}, {"k": "x"}])
        relation = engine.relation(FileTarget(as_text), ["k"])
        assert engine.evaluate(control, relation, 5).violation_count == 1
        assert compiled == [False, True]
    finally:
        engine.close()
