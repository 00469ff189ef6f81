"""Every DuckDB connection Reflex opens draws no progress bar: DuckDB's Python client prints one
to stdout for a query over two seconds, which corrupted ``control run --json`` on a slow
snapshot (seen on 10M rows under load)."""

from __future__ import annotations

import ast
from pathlib import Path

import reflex_actions
from reflex_actions.snapshots import duckdb_connection


def test_a_connection_and_its_cursors_draw_no_progress_bar_and_keep_its_settings() -> None:
    con = duckdb_connection(memory_limit="256MiB").cursor()  # an engine worker's cursor
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() "
            "WHERE name IN ('enable_progress_bar', 'memory_limit')"
        ).fetchall()
    )
    assert settings["enable_progress_bar"] == "false"
    assert settings["memory_limit"] in ("256.0 MiB", "268.4 MB", "256.0MiB")


def test_every_connection_is_opened_through_that_one_function() -> None:
    package = Path(reflex_actions.__file__).parent
    opened = [
        f"{path.relative_to(package)}:{function.name}"
        for path in sorted(package.rglob("*.py"))
        for function in ast.walk(ast.parse(path.read_text()))
        if isinstance(function, ast.FunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "connect"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "duckdb"
    ]
    assert opened == ["snapshots.py:duckdb_connection"]
