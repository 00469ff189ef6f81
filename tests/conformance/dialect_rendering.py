"""Checks of a ported control's query trees in every dialect an engine may render them in.

A control compiles once, dialect-neutral; each engine renders the tree in its own dialect. These
helpers render a control's counts and sample in the executing and rendering-only dialects, parse
each text back, and check that identifiers are quoted the dialect's way, that nothing the dialect
cannot express was dropped on the way (sqlglot's "unsupported" raised, not warned), and that
bound values stay out of the text. ``RecordingEngine`` records what an evaluation fetched, so a
test can prove a passing run reads the counts only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from reflex_actions.controls import Control
from reflex_actions.engines.base import TableTarget, table_source
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.sql import ControlQuery, Relation

#: the dialects of the executing engines besides DuckDB, then the rendering-only ones
RENDERED_DIALECTS = (
    "postgres",
    "spark",
    "snowflake",
    "bigquery",
    "databricks",
    "trino",
    "redshift",
)


def table_relation(
    types: Mapping[str, str] | None = None,
    parent_types: Mapping[str, str] | None = None,
    partition: str = "2026-01-01",
) -> Relation:
    """A table's partition (its value bound) as an engine reads it, with its parent table."""
    child = TableTarget("shop.public.child", partition_column="day", partition=partition)
    return Relation(
        source=table_source(child),
        params={"partition": partition},
        types=dict(types or {}),
        reference=Relation(
            source=table_source(TableTarget("shop.public.parent")),
            types=dict(parent_types or {}),
        ),
    )


def compiled(control: Control, relation: Relation, sample_size: int = 5) -> ControlQuery:
    """The control's query trees over ``relation``."""
    return control.compile(relation, sample_size)


def rendered(
    control: Control, relation: Relation, dialect: str, sample_size: int = 5
) -> list[tuple[str, dict[str, Any]]]:
    """The counts and the sample (when the control has one) in ``dialect``, with their values."""
    query = compiled(control, relation, sample_size)
    trees = [query.counts, *([query.sample] if query.sample is not None else [])]
    return [query.render(tree, relation, dialect) for tree in trees]


def quoted(name: str, dialect: str) -> str:
    """How ``dialect`` writes ``name`` as a quoted identifier."""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


def check_every_dialect(
    control: Control,
    relation: Relation,
    names: Iterable[str],
    bound_values: Sequence[Any] = (),
    dialects: Sequence[str] = RENDERED_DIALECTS,
) -> dict[str, list[str]]:
    """Render the control's queries in each dialect and check them; the texts by dialect."""
    query = compiled(control, relation)
    texts: dict[str, list[str]] = {}
    for dialect in dialects:
        for tree in (query.counts, query.sample):
            if tree is not None:  # raises where the dialect cannot say what the tree says
                tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
        texts[dialect] = []
        for sql, params in rendered(control, relation, dialect):
            sqlglot.parse_one(sql, read=dialect)
            for name in names:
                assert quoted(name, dialect) in sql, (dialect, name, sql)
            for value in bound_values:
                assert str(value) not in sql, (dialect, value, sql)
            assert set(params) <= {*relation.params, *query.params}, (dialect, params)
            texts[dialect].append(sql)
    return texts


class RecordingEngine(DuckDBEngine):
    """The DuckDB engine, recording every query it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []

    def fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        self.fetched.append(sql)
        return super().fetch(sql, params)
