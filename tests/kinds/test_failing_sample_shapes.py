"""A failing row control's sample query sorts only by what varies among the rows it samples.

Over the NULL rows of a one-field ``not_null``, that field is NULL and its flag true in every
row: sorting by them orders nothing, and keeps a server from stopping at the limit (PostgreSQL
sorted every NULL row of a 1M-row table before returning five identical ones). The samples
themselves are unchanged: the conformance suites hold every engine to them.
"""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from reflex_actions.controls.not_null import NotNullControl
from reflex_actions.executor import run_control
from reflex_actions.sql import Relation, column
from tests.conformance.dialect_rendering import table_relation
from tests.conftest import write_snapshot


def _sample_order(control: NotNullControl, relation: Relation) -> list[exp.Expression]:
    """The expressions the sample query sorts by (its outermost ORDER BY), unwrapped."""
    sample = control.compile(relation).sample
    assert sample is not None
    order = sample.args.get("order")
    return [] if order is None else [key.this for key in order.expressions]


def test_a_one_field_sample_keyed_by_that_field_is_not_sorted() -> None:
    """Every sampled row is (NULL, true): any five of them are the same five."""
    order = _sample_order(NotNullControl(field="account_id"), table_relation())
    assert order == []


def test_a_one_field_sample_sorts_by_its_key_alone() -> None:
    order = _sample_order(NotNullControl(field="account_id", key=["id"]), table_relation())
    assert order == [column("id")]


def test_a_key_holding_the_field_sorts_by_the_other_key_columns() -> None:
    control = NotNullControl(field="account_id", key=["account_id", "id"])
    assert _sample_order(control, table_relation()) == [column("id")]


def test_a_one_field_sample_shown_with_other_columns_sorts_by_them() -> None:
    """No key column tells its NULL rows apart: they are shown, and sorted, by others."""
    relation = table_relation({"account_id": "VARCHAR", "id": "BIGINT", "day": "DATE"})
    order = _sample_order(NotNullControl(field="account_id"), relation)
    assert order == [column("id"), column("day")]


def test_several_fields_still_sort_by_every_key_and_which_fields_are_null() -> None:
    """With two fields a sampled row may have either one NULL: neither is constant."""
    control = NotNullControl(fields=["account_id", "currency"], key=["id"])
    sample = control.compile(table_relation()).sample
    assert sample is not None
    first = sample.find(exp.Subquery)
    assert first is not None
    inner = [key.this for key in first.this.args["order"].expressions]
    assert inner == [
        column("id"),
        column("account_id").is_(exp.null()),
        column("currency").is_(exp.null()),
    ]


def test_the_unsorted_sample_shows_the_null_rows_it_did_before(tmp_path: Path) -> None:
    rows = [{"id": f"t{i}", "account_id": None if i % 2 else f"a{i}"} for i in range(9)]
    path = write_snapshot(tmp_path / "s.parquet", rows)
    keyed_by_field = run_control(NotNullControl(field="account_id"), path, sample_size=3)
    keyed_by_id = run_control(NotNullControl(field="account_id", key=["id"]), path, sample_size=3)
    null_row = {"null_fields": ["account_id"], "null_counts": {"account_id": 4}}
    # keyed by the NULL field alone, the rows are shown (and sorted) by the snapshot's other column
    assert keyed_by_field.sample == [{"row": {"id": f"t{i}"}, **null_row} for i in (1, 3, 5)]
    assert keyed_by_id.sample == [{"key": {"id": f"t{i}"}, **null_row} for i in (1, 3, 5)]
