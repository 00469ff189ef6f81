"""The row-value controls (``not_null``, ``accepted_values``, ``value_range``) compile to
dialect-neutral trees: their counts and samples, rendered in every executing and rendering-only
dialect, parse back, quote every (hostile) name the dialect's way and carry every value as a bound
parameter; a passing snapshot reads the counts only, a failing one the sample too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reflex_actions.controls import Control
from reflex_actions.controls.not_null import NotNullControl
from reflex_actions.controls.values import AcceptedValuesControl, ValueRangeControl
from reflex_actions.executor import run_control
from reflex_actions.sql import (
    EXECUTED_DIALECTS,
    SHOWN_DIALECT,
    Relation,
    column,
    count_where,
    exp,
    render,
    shown_sql,
)
from tests.conformance.control_cases import HOSTILE_NAMES
from tests.conformance.dialect_rendering import (
    RENDERED_DIALECTS,
    RecordingEngine,
    check_every_dialect,
    quoted,
    table_relation,
)
from tests.conftest import write_snapshot

#: values no rendered text may hold (each is bound): texts and numbers found nowhere else
TEXTS = ["EUR'; DROP TABLE t; --", "ZZ$1?"]
NUMBERS = [123457, 98765.25]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_not_null_renders_in_every_dialect_quoting_every_name(name: str) -> None:
    key = f"{name} key"
    control = NotNullControl(fields=[name, "other"], key=[key])
    texts = check_every_dialect(control, table_relation(), [name, "other"])
    assert set(texts) == set(RENDERED_DIALECTS)
    for dialect, (counts, sample) in texts.items():  # the key identifies the sampled rows only
        assert quoted(key, dialect) not in counts and quoted(key, dialect) in sample, dialect


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize("column_type", [None, "VARCHAR", "DOUBLE", "BIGINT"])
def test_accepted_values_render_in_every_dialect_with_every_value_bound(
    name: str, column_type: str | None
) -> None:
    control = AcceptedValuesControl(field=name, values=[*TEXTS, *NUMBERS])
    relation = table_relation({name: column_type} if column_type else {})
    texts = check_every_dialect(control, relation, [name], bound_values=[*TEXTS, *NUMBERS])
    assert all(len(queries) == 2 for queries in texts.values())


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize(
    "column_type", [None, "VARCHAR", "DOUBLE", "BIGINT", "DECIMAL(18,2)", "TINYINT"]
)
def test_value_range_renders_in_every_dialect_with_its_bounds_bound(
    name: str, column_type: str | None
) -> None:
    """Natively compared (integer, DECIMAL) or read as a number, the bounds stay bound."""
    control = ValueRangeControl(field=name, min=-4321, max=98765)
    relation = table_relation({name: column_type} if column_type else {})
    texts = check_every_dialect(control, relation, [name], bound_values=[-4321, 4321, 98765])
    assert all(len(queries) == 2 for queries in texts.values())


def test_the_duckdb_text_a_steward_reads_names_no_duckdb_only_construct() -> None:
    """The shown trees are portable SQL: no list aggregates, FILTER, QUALIFY or ``::`` casts."""
    relation = table_relation({"amount": "DECIMAL(18,2)"})
    for control in (
        NotNullControl(fields=["account_id", "amount"], key=["id"]),
        AcceptedValuesControl(field="currency", values=["EUR", 7]),
        ValueRangeControl(field="amount", min=0, max=10.5),
    ):
        shown = control.compile(relation).shown(relation, SHOWN_DIALECT).upper()
        for construct in ("LIST(", "LIST_CONTAINS", "ROW(", "FILTER (", "QUALIFY", "::", "[1:"):
            assert construct not in shown, (control.type, construct, shown)


ROWS = [
    {"id": "t3", "account": "a3", "currency": "EUR", "amount": 10},
    {"id": "t1", "account": "a1", "currency": "GBP", "amount": 250},
    {"id": "t2", "account": "a2", "currency": "EUR", "amount": 0},
]
BROKEN = [
    *ROWS,
    {"id": "t5", "account": None, "currency": "XXX", "amount": -5},
    {"id": "t4", "account": None, "currency": "XXX", "amount": -5},
]
CONTROLS = {
    "not_null": NotNullControl(field="account", key=["id"]),
    "accepted_values": AcceptedValuesControl(field="currency", values=["EUR", "GBP"]),
    "value_range": ValueRangeControl(field="amount", min=0, max=250),
}
#: each control's first example on the broken snapshot, worst first
FIRST_EXAMPLE: dict[str, dict[str, Any]] = {
    "not_null": {"key": {"id": "t4"}, "null_fields": ["account"], "null_counts": {"account": 2}},
    "accepted_values": {"value": "XXX", "occurrences": 2},
    "value_range": {"value": "-5", "occurrences": 2},
}


#: The controls whose sample groups the offending values: on Parquet (its row count in the
#: footer) they read those values once, the sample carrying their total, pass or fail.
GROUPED = ("accepted_values", "value_range")


@pytest.mark.parametrize("snapshot_format", ["parquet", "csv"])
@pytest.mark.parametrize("type_name", list(CONTROLS))
def test_a_passing_snapshot_reads_the_counts_only_a_failing_one_the_sample_too(
    tmp_path: Path, type_name: str, snapshot_format: str
) -> None:
    control: Control = CONTROLS[type_name]
    one_scan = type_name in GROUPED and snapshot_format == "parquet"
    good = write_snapshot(tmp_path / f"good.{snapshot_format}", ROWS)
    engine = RecordingEngine()
    passed = run_control(control, good, engine=engine)
    assert (passed.passed, passed.rows_scanned, passed.violation_count, passed.sample) == (
        True,
        3,
        0,
        [],
    )
    assert len(engine.fetched) == (2 if one_scan else 1)

    bad = write_snapshot(tmp_path / f"bad.{snapshot_format}", BROKEN)
    engine = RecordingEngine()
    failed = run_control(control, bad, engine=engine)
    assert (failed.passed, failed.rows_scanned, failed.violation_count) == (False, 5, 2)
    assert failed.sample[0] == FIRST_EXAMPLE[type_name]
    assert len(engine.fetched) == 2
    if one_scan:  # the footer's count, then the one query filtering the rows
        assert ["WHERE" in sql for sql in engine.fetched] == [False, True]


@pytest.mark.parametrize("type_name", GROUPED)
def test_the_sample_s_total_counts_every_offending_row_beyond_the_shown_values(
    tmp_path: Path, type_name: str
) -> None:
    """Seven distinct offending values, two shown: the violation count is all nine rows."""
    offending = [
        {"id": f"x{i}", "account": "a", "currency": f"Q{i % 7}", "amount": -1 - i % 7}
        for i in range(9)
    ]
    path = write_snapshot(tmp_path / "s.parquet", [*ROWS, *offending])
    result = run_control(CONTROLS[type_name], path, sample_size=2)
    assert (result.rows_scanned, result.violation_count, len(result.sample)) == (12, 9, 2)
    assert [row["occurrences"] for row in result.sample] == [2, 2]
    none_shown = run_control(CONTROLS[type_name], path, sample_size=0)
    assert (none_shown.violation_count, none_shown.sample, none_shown.passed) == (9, [], False)


def test_one_field_s_null_rows_are_read_once_for_the_sample_their_count_from_the_counts(
    tmp_path: Path,
) -> None:
    """With one field checked its NULL rows are the violations: the sample reads the first of
    them alone and shows the counts' number, where several fields need each one's count."""
    rows = [{"id": i, "account": None if i % 3 == 0 else f"a{i}"} for i in range(1, 10)]
    path = write_snapshot(tmp_path / "s.parquet", rows)
    engine = RecordingEngine()
    result = run_control(NotNullControl(field="account", key=["id"]), path, engine=engine)
    assert result.violation_count == 3
    assert [row["key"] for row in result.sample] == [{"id": 3}, {"id": 6}, {"id": 9}]
    assert {row["null_counts"]["account"] for row in result.sample} == {3}
    _, sample = engine.fetched
    assert sample.count("FROM snapshot") == 1 and "CROSS JOIN" not in sample.upper()


def test_a_sample_carrying_the_violation_count_is_shown_as_always_run() -> None:
    """Shown against a Parquet file (its row count in the footer), the grouped sample runs
    pass or fail and says so; against a table, only when the counts fail."""
    control = CONTROLS["accepted_values"]
    footer = Relation.of("SELECT * FROM read_parquet($snapshot)", row_count_is_free=True)
    shown = shown_sql(control.compile(footer), footer)
    assert "-- the worst offenders, each with the violation count" in shown
    assert "SUM(COUNT(*)) OVER ()" in shown
    table = Relation.of("SELECT * FROM read_parquet($snapshot)")
    assert "-- only when the counts fail" in shown_sql(control.compile(table), table)


def test_each_dialect_counts_rows_meeting_a_condition_its_own_way() -> None:
    """COUNT_IF where the dialect has one, FILTER in PostgreSQL, COUNT(CASE ...) elsewhere:
    never sqlglot's SUM(CASE ... ELSE 0 END), which is NULL on no rows."""
    condition = column("a").is_(exp.null())
    query = exp.select(count_where(condition).as_("n")).from_("snapshot")
    relation = Relation.of("SELECT * FROM read_parquet($snapshot)", params={"snapshot": "x"})
    expected = {
        "duckdb": "COUNT_IF(",
        "postgres": "COUNT(*) FILTER(WHERE",
        "spark": "COUNT_IF(",
        "databricks": "COUNT_IF(",
        "snowflake": "COUNT_IF(",
        "bigquery": "COUNTIF(",
        "trino": "COUNT_IF(",
        "redshift": "COUNT(CASE WHEN",
    }
    for dialect, form in expected.items():
        sql, _ = render(query, relation, dialect)
        assert form in sql and "SUM(" not in sql, (dialect, sql)
    assert set(expected) == {*EXECUTED_DIALECTS, *RENDERED_DIALECTS}


@pytest.mark.parametrize(
    "control",
    [
        NotNullControl(field="a"),
        AcceptedValuesControl(field="a", values=["x"]),
        ValueRangeControl(field="a", min=1),
    ],
    ids=lambda control: control.type,
)
def test_a_count_of_no_rows_is_0_not_null_in_duckdb(tmp_path: Path, control: Control) -> None:
    """DuckDB's COUNT_IF sums its condition (NULL over no rows): an empty CSV, read without a
    row count in its footer, is judged, not a TypeError."""
    empty = tmp_path / "empty.csv"
    empty.write_text("a\n")
    result = run_control(control, empty)
    assert (result.passed, result.rows_scanned, result.violation_count) == (True, 0, 0)
