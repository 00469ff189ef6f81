"""``schema_contract`` judged on the schema DataHub records (``schemaMetadata``), reading no
data: the recorded fields' names and types are bound, their native types compare by the same
family table as DESCRIBE's and the contract's, and DataHub's type class decides where the
native type does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reflex_actions.controls import parse_control_spec
from reflex_actions.errors import SnapshotNotFoundError
from reflex_actions.executor import run_control, run_control_on_recorded
from reflex_actions.kinds.base import Trigger
from reflex_actions.registry import triggered_by
from reflex_actions.sql import NO_ROWS, RecordedFacts, Relation, shown_sql
from tests.conformance.control_cases import HOSTILE_NAMES

#: what DataHub records of shop.orders, as a Postgres ingestion writes it
ORDERS_FIELDS = (
    ("order_id", "character varying(64)", "string"),
    ("amount", "bigint", "number"),
    ("paid_at", "timestamp without time zone", "time"),
)
ORDERS_CONTRACT = {"order_id": "VARCHAR", "amount": "BIGINT", "paid_at": "TIMESTAMP"}


def contract(columns: dict[str, str], allow_new_columns: bool = True) -> Any:
    return parse_control_spec(
        {"type": "schema_contract", "columns": columns, "allow_new_columns": allow_new_columns}
    )


def judged(control: Any, *fields: tuple[str, str | None, str | None]) -> Any:
    return run_control_on_recorded(control, RecordedFacts(columns=fields), "schema-v2")


def value_judged(expected: str, native: str | None, type_class: str | None) -> Any:
    """A contract on ``id`` and ``value`` judged on a recorded ``value`` of the given types."""
    control = contract({"id": "VARCHAR", "value": expected})
    return judged(control, ("id", "text", "string"), ("value", native, type_class))


def test_the_contract_is_evaluated_on_a_recorded_schema_change() -> None:
    """A ``schemaMetadata`` change of a covered dataset evaluates the contract on its fields."""
    assert triggered_by("schema_contract", Trigger.ASPECT_CHANGE)
    assert contract(ORDERS_CONTRACT).judged_on_recorded() == {"columns"}


def test_the_recorded_schema_matching_the_contract_passes_reading_no_rows() -> None:
    result = judged(contract(ORDERS_CONTRACT), *ORDERS_FIELDS)
    assert (result.passed, result.violation_count, result.rows_scanned) == (True, 0, 0)


def test_a_renamed_recorded_column_is_one_violation_the_sample_names() -> None:
    fields = (ORDERS_FIELDS[0], ("amount_minor", "bigint", "number"), ORDERS_FIELDS[2])
    result = judged(contract(ORDERS_CONTRACT), *fields)
    assert (result.passed, result.violation_count, result.rows_scanned) == (False, 1, 0)
    assert result.sample == [{"column": "amount", "expected": "BIGINT", "found": None}]


def test_a_retype_across_families_breaks() -> None:
    """BigQuery's INT64 became a STRING: the sample shows the type as DataHub records it."""
    fields = (("order_id", "STRING", "string"), ("amount", "STRING", "string"))
    result = judged(contract({"order_id": "VARCHAR", "amount": "INT64"}), *fields)
    assert result.violation_count == 1
    assert result.sample == [{"column": "amount", "expected": "INT64", "found": "STRING"}]


@pytest.mark.parametrize(
    ("expected", "native", "type_class"),
    [
        ("VARCHAR(64)", "character varying", "string"),
        ("VARCHAR", "STRING", "string"),
        ("TEXT", "VARCHAR(64)", "string"),
        ("INTEGER", "bigint", "number"),
        ("INT", "BIGINT", "number"),
        ("BIGINT", "int64", "number"),
        ("BIGINT", "long", "number"),
        ("INTEGER", "int", "number"),
        ("DECIMAL(18,2)", "NUMERIC(10,0)", "number"),
        ("DECIMAL(18,2)", "NUMBER(38, 0)", "number"),
        ("DOUBLE", "double precision", "number"),
        ("DOUBLE", "FLOAT64", "number"),
        ("FLOAT", "double", "number"),
        ("BOOLEAN", "boolean", "boolean"),
        ("TIMESTAMP", "timestamp(6) without time zone", "time"),
        ("TIMESTAMPTZ", "timestamp(3) with time zone", "time"),
        ("BLOB", "bytea", "bytes"),
    ],
)
def test_a_recorded_type_in_the_contract_types_family_is_no_break(
    expected: str, native: str, type_class: str
) -> None:
    result = value_judged(expected, native, type_class)
    assert (result.violation_count, result.sample) == (0, [])


@pytest.mark.parametrize(
    ("expected", "native", "type_class"),
    [
        ("BIGINT", "double precision", "number"),  # integer -> floating
        ("DECIMAL(18,2)", "int64", "number"),  # decimal -> integer
        ("TIMESTAMP", "timestamptz", "time"),  # gains a zone
        ("DATE", "timestamp", "time"),
        ("VARCHAR", "struct<street:string,city:string>", "record"),
    ],
)
def test_a_recorded_type_in_another_family_breaks(
    expected: str, native: str, type_class: str
) -> None:
    result = value_judged(expected, native, type_class)
    assert result.violation_count == 1
    assert [row["column"] for row in result.sample] == ["value"]


@pytest.mark.parametrize(
    ("expected", "native", "type_class"),
    [
        ("VARCHAR", None, "string"),
        ("VARCHAR", "citext_domain", "string"),
        ("VARCHAR", "enum", "enum"),  # an Avro enum: read as text
        ("BOOLEAN", None, "boolean"),
        ("DATE", "int", "date"),  # an Avro int with logicalType date
        ("TIMESTAMP", "long", "time"),  # an Avro long with logicalType timestamp-millis
        ("TIMESTAMP", None, "time"),
        ("BLOB", "fixed", "fixed"),
        ("BYTEA", None, "bytes"),
    ],
)
def test_the_datahub_type_class_decides_where_the_native_type_does_not(
    expected: str, native: str | None, type_class: str
) -> None:
    """An unknown (or absent) native type, or one the class contradicts (Avro's physical type
    under a logical type), is judged by DataHub's type class."""
    result = value_judged(expected, native, type_class)
    assert (result.violation_count, result.sample) == (0, [])


@pytest.mark.parametrize("expected", ["BIGINT", "DECIMAL(18,2)", "DOUBLE", "NUMBER"])
def test_a_number_of_unknown_native_type_confirms_no_numeric_family(expected: str) -> None:
    """DataHub's ``number`` class may be an integer, a decimal or a floating type: it is a
    family of its own, so a contract's numeric type is not confirmed (and the sample says
    what DataHub records)."""
    result = judged(contract({"value": expected}), ("value", "money_t", "number"))
    assert result.sample == [{"column": "value", "expected": expected, "found": "MONEY_T"}]
    without_native = judged(contract({"value": expected}), ("value", None, "number"))
    assert without_native.sample == [{"column": "value", "expected": expected, "found": "number"}]


def test_a_recorded_field_without_any_type_is_present_its_type_unjudged() -> None:
    """DataHub requires both types, but a field recorded with neither is not a missing column:
    nothing says its type changed."""
    result = value_judged("BIGINT", None, None)
    assert (result.violation_count, result.sample) == (0, [])
    assert value_judged("BIGINT", None, "string").violation_count == 1


def test_new_recorded_columns_count_only_when_not_allowed() -> None:
    fields = (*ORDERS_FIELDS, ("note", "varchar", "string"))
    assert judged(contract(ORDERS_CONTRACT), *fields).violation_count == 0
    strict = judged(contract(ORDERS_CONTRACT, allow_new_columns=False), *fields)
    assert (strict.violation_count, strict.rows_scanned) == (1, 0)
    assert strict.sample == [{"column": "note", "expected": None, "found": "VARCHAR"}]


def test_hostile_recorded_names_and_types_are_bound_never_formatted() -> None:
    kept, dropped = HOSTILE_NAMES[0], HOSTILE_NAMES[2]
    hostile_type = "int'); DROP TABLE t; --"
    control = contract({kept: "BIGINT", dropped: "VARCHAR"}, allow_new_columns=False)
    fields = ((kept, "int8", "number"), ('a"; DROP', hostile_type, None))
    relation = Relation.of(NO_ROWS, recorded=RecordedFacts(columns=fields))
    shown = shown_sql(control.compile(relation), relation)
    for text in (kept, dropped, 'a"; DROP', hostile_type):
        assert text not in shown
    result = run_control_on_recorded(control, RecordedFacts(columns=fields), "v2")
    assert result.sample == [
        {"column": 'a"; DROP', "expected": None, "found": hostile_type.upper()},
        {"column": dropped, "expected": "VARCHAR", "found": None},
    ]


@pytest.mark.parametrize("columns", [None, ()])
def test_without_a_recorded_schema_the_control_says_so(
    columns: tuple[tuple[str, str | None, str | None], ...] | None,
) -> None:
    facts = RecordedFacts(row_count=3, columns=columns)
    with pytest.raises(SnapshotNotFoundError, match="DataHub records no schema"):
        run_control_on_recorded(contract(ORDERS_CONTRACT), facts, "v2")


def test_a_huge_native_type_is_judged_and_shown_bounded() -> None:
    """A 10 MB native type (a deeply nested struct's) is no type any family lists: it is
    judged by its class, or as a family of its own, and shown cut."""
    huge = "struct<" + "field:int," * 1_000_000 + ">"
    fields = (("payload", huge, "record"), ("note", huge, "string"))
    result = judged(contract({"payload": "VARCHAR", "note": "VARCHAR"}), *fields)
    assert result.violation_count == 1
    [row] = result.sample
    assert (row["column"], row["expected"]) == ("payload", "VARCHAR")
    assert row["found"].startswith("STRUCT<FIELD:INT,") and len(row["found"]) < 100


def test_a_huge_recorded_name_is_shown_bounded_and_matches_no_contract_column() -> None:
    huge = "n" * 10_000_000
    control = contract({"id": "VARCHAR", "n" * 255: "VARCHAR"}, allow_new_columns=False)
    result = judged(control, ("id", "text", "string"), (huge, "text", "string"))
    assert result.violation_count == 2
    assert sorted(len(row["column"]) for row in result.sample) == [255, 258]


def test_the_recorded_and_the_described_schema_are_judged_alike(tmp_path: Path) -> None:
    """One judgement for both: a snapshot's DESCRIBE types, recorded as DataHub's native types,
    give the same violations and samples (rows aside)."""
    path = tmp_path / "s.parquet"
    columns = {
        "order_id": pa.array([1], pa.int32()),
        "amount": pa.array([1.5], pa.float64()),
        "paid_at": pa.array([None], pa.timestamp("us", tz="UTC")),
        "note": pa.array(["x"]),
    }
    pq.write_table(pa.table(columns), path)
    control = contract({**ORDERS_CONTRACT, "gone": "DATE"}, allow_new_columns=False)
    described = run_control(control, path)
    recorded = judged(
        control,
        ("order_id", "INTEGER", "number"),
        ("amount", "DOUBLE", "number"),
        ("paid_at", "TIMESTAMP WITH TIME ZONE", "time"),
        ("note", "VARCHAR", "string"),
    )
    assert described.violation_count == recorded.violation_count == 5
    assert described.sample == recorded.sample


def test_a_contract_may_state_a_platform_type_name(tmp_path: Path) -> None:
    """The aliases are the family table's: a contract written in BigQuery's or Postgres's names
    holds on a DuckDB snapshot too."""
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"id": pa.array([1]), "name": pa.array(["a"])}), path)
    control = contract({"id": "INT64", "name": "CHARACTER VARYING(64)"})
    assert run_control(control, path).violation_count == 0
