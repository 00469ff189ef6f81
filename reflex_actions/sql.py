"""SQL query trees shared by every control template.

A control builds its queries as sqlglot trees over two named tables, ``snapshot`` (the target
it judges) and ``parent`` (the table a referencing control checks it against); an engine says
how it reads each (a Parquet file in DuckDB, a table in PostgreSQL) and renders the whole tree
in its dialect. Identifiers are always quoted nodes and values always bound placeholders:
control specs and schemas come from users and incident text, and are never formatted into SQL.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any


class _LazyModule(ModuleType):
    """A module imported on its first attribute: sqlglot costs a run ~100 ms to import, and a
    run whose SQL was rendered before (``engines.rendering.RenderedStore``) builds no tree."""

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(vars(module))  # later lookups are plain attribute reads
        return getattr(module, attribute)


if TYPE_CHECKING:
    from sqlglot import exp
else:
    #: sqlglot's expressions, as every template and engine in this package builds trees with
    exp = _LazyModule("sqlglot.expressions")

#: The names a control's query reads its target and the target's parent by.
SNAPSHOT = "snapshot"
PARENT = "parent"
#: The dialect a control's query is shown in (lesson pages, assertion logic, `control compile`).
SHOWN_DIALECT = "duckdb"
#: The dialects of the engines that execute here, and those Reflex only renders (SQL
#: generated and parsed back in tests, not executed here).
EXECUTED_DIALECTS = ("duckdb", "postgres", "spark")
RENDERED_DIALECTS = ("snowflake", "bigquery", "databricks", "trino", "redshift")
#: The dialects that would copy a target read twice by one query (DuckDB, PostgreSQL) unless
#: told ``NOT MATERIALIZED``: the target is read as it streams, a Parquet footer answering a
#: count (the others inline a CTE, or do not know the clause)
STREAMED_CTE_DIALECTS = ("duckdb", "postgres")


def quote_identifier(name: str) -> str:
    """Quote a column name for DuckDB, doubling embedded quotes."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid column name {name!r}: empty or contains a NUL byte")
    return '"' + name.replace('"', '""') + '"'


def column(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference (of ``table`` when given)."""
    quote_identifier(name)  # the same refusal of an empty name or a NUL byte
    return exp.column(name, table=table, quoted=True)


def param(name: str) -> exp.Placeholder:
    """A bound value: each dialect renders its driver's marker (``$v``, ``%(v)s``, ``:v``)."""
    return exp.Placeholder(this=name)


def count_where(condition: exp.Expression) -> exp.Expression:
    """The rows of a group meeting ``condition`` (0 when none does), as each dialect counts
    them fastest (:func:`_counted_where`): ``COUNT_IF(condition)`` where it has one."""
    return exp.CountIf(this=condition)


#: The dialects with a COUNT_IF of their own (sqlglot renders it so); PostgreSQL counts with
#: ``COUNT(*) FILTER (WHERE ...)``, ~8% faster than a CASE over 1M rows there; the others
#: with ``COUNT(CASE WHEN ... THEN 1 END)`` (sqlglot's ``SUM(CASE ... ELSE 0 END)`` would be
#: NULL, not 0, on no rows).
COUNT_IF_DIALECTS = ("duckdb", "spark", "databricks", "snowflake", "bigquery", "trino")
FILTER_DIALECTS = ("postgres",)
#: The dialects whose COUNT_IF is a sum, NULL over no rows (or none whose condition is known):
#: counted as ``COALESCE(COUNT_IF(...), 0)``, as fast (FILTER is ~60% slower in DuckDB).
SUMMED_COUNT_IF_DIALECTS = ("duckdb",)


def _counted_where(node: exp.Expression, dialect: str) -> exp.Expression:
    if not isinstance(node, exp.CountIf):
        return node
    if dialect in SUMMED_COUNT_IF_DIALECTS:
        return exp.func("coalesce", node, exp.Literal.number(0))
    if dialect in COUNT_IF_DIALECTS:
        return node
    if dialect in FILTER_DIALECTS:
        counted = exp.func("count", exp.Star())
        return exp.Filter(this=counted, expression=exp.Where(this=node.this))
    return exp.func("count", exp.case().when(node.this, exp.Literal.number(1)))


def rows_and_violations(violating: exp.Expression, relation: Relation) -> exp.Select:
    """The counts of a row control: ``rows_scanned`` and the ``violation_count`` of rows
    meeting ``violating``. Where the engine knows a target's row count without reading it (a
    Parquet footer) each is its own scalar query, the second filtering inside the scan as a
    hand-written ``SELECT count(*) ... WHERE`` does (5x faster than one pass judging every row
    on 10M rows in DuckDB); elsewhere (a server table) one pass counts both."""
    if not relation.row_count_is_free:
        return exp.select(
            exp.func("count", exp.Star()).as_("rows_scanned"),
            count_where(violating).as_("violation_count"),
        ).from_(SNAPSHOT)
    every = exp.select(exp.func("count", exp.Star())).from_(SNAPSHOT)
    meeting = exp.select(exp.func("count", exp.Star())).from_(SNAPSHOT).where(violating)
    return exp.select(
        every.subquery().as_("rows_scanned"), meeting.subquery().as_("violation_count")
    )


@lru_cache(maxsize=256)
def parse(sql: str, dialect: str = SHOWN_DIALECT) -> exp.Expression:
    """A tree from fixed SQL text written in this package (never from user text), parsed once
    (a backtest reads hundreds of files through one reader). The tree is shared and never
    changed in place: rendering and sqlglot's builders copy a tree."""
    import sqlglot

    return sqlglot.parse_one(sql, read=dialect)


@dataclass(frozen=True)
class RecordedFacts:
    """What DataHub records about a table, so a control can be judged without reading its data:
    ``datasetProfile.rowCount``, ``operation.lastUpdatedTimestamp`` and the ``schemaMetadata``
    fields (name, type). Each is None when DataHub has none; a control needing it says so."""

    row_count: int | None = None
    last_updated_ms: int | None = None
    #: the ``schemaMetadata`` fields, each (name, ``nativeDataType`` or None, DataHub's type
    #: class as ``catalog.translate.fields_of`` names it: "string", "number", "boolean", "date",
    #: "time", "bytes", ... or None); the name is the simple field path
    columns: tuple[tuple[str, str | None, str | None], ...] | None = None


#: The relation of a control judged on recorded facts alone: no rows.
NO_ROWS = "SELECT NULL AS no_rows WHERE false"


@dataclass(frozen=True)
class Relation:
    """A table a control reads: how its engine reads it (``source``, a query tree, or fixed SQL
    text of this package in DuckDB's dialect, parsed when a control is compiled against it;
    with its bound parameters), and what is known of it.

    ``types`` are the column types where known, in DuckDB's names whatever the engine (a
    control may compare natively when two columns share one), and ``reference`` is the other
    table a control checks this one against (a child's parent), when the control has one.
    """

    source: exp.Query | str
    params: dict[str, Any] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)
    reference: Relation | None = None
    #: the row counts of this dataset's earlier evaluations, oldest first (what a volume
    #: control judges a count against); empty when there are none
    earlier_counts: tuple[int, ...] = ()
    #: True when the reader reads every column as text (CSV): its types say nothing of the data
    text_only: bool = False
    #: True when a filter on a FLOAT or DOUBLE column sees every NaN row: the engine prunes by
    #: no statistics that leave NaNs out (Parquet's do, by its spec; Spark prunes by them), so
    #: a control may compare such a column in its own type
    filters_see_nans: bool = False
    #: the time the control is judged at (epoch milliseconds), for a control judging age
    as_of_ms: int | None = None
    #: what the catalog records of the table, for a control judged on metadata alone
    recorded: RecordedFacts | None = None
    #: whether the engine knows the row count without reading the rows (a Parquet footer):
    #: a control may then count its violations in a query of their own
    row_count_is_free: bool = False
    #: the rows of the whole target as its footer says, when the engine read it ahead (a
    #: backtest's Parquet files): a counts query of ``rows_scanned`` alone is answered by it
    footer_rows: int | None = None

    @classmethod
    def of(cls, sql: str, **known: Any) -> Relation:
        """A relation read by fixed SQL text in DuckDB's dialect (an engine's reader, with its
        placeholders)."""
        return cls(source=sql, **known)

    @property
    def tree(self) -> exp.Query:
        """The source as a query tree (shared: copy it to change it)."""
        if not isinstance(self.source, str):
            return self.source
        tree = parse(self.source)
        assert isinstance(tree, exp.Query)
        return tree


@dataclass(frozen=True)
class ControlQuery:
    """A control compiled against a relation: cheapest first.

    ``counts`` returns one row: ``rows_scanned``, ``violation_count``, then, for a control that
    reports them, its measures (what it measured, pass or fail: an age, a count and bounds),
    read like a sample row. ``sample`` returns the worst offenders, one row each, and runs only
    when the counts fail; a control whose measures are its judgement has none and
    ``sample_is_measures`` (its failing sample is the measures row).
    """

    counts: exp.Query
    sample: exp.Query | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    sample_is_measures: bool = False
    #: each sample row is followed by the counts' ``violation_count`` (a control whose sample
    #: shows that count, e.g. one field's NULL rows, need not count it again)
    sample_counted: bool = False
    #: ``counts`` returns ``rows_scanned`` alone (a Parquet footer's count) and the sample,
    #: always run, ends each row with the violation count (its groups' total before the
    #: limit; no rows: none): a failing check reads its violations once, a passing one as a
    #: hand-written ``count(*) ... WHERE`` does
    sample_totals: bool = False
    #: a cheaper query of the same counts row from what the reader knows without reading
    #: the rows (a Parquet footer's statistics), returning it when that settles the
    #: judgement and no row when it does not; ``counts`` runs only then
    settled: exp.Query | None = None

    def render(
        self, query: exp.Query, relation: Relation, dialect: str
    ) -> tuple[str, dict[str, Any]]:
        """``query`` (``counts`` or ``sample``) as SQL in ``dialect`` over ``relation``, and
        the parameters it binds (only those it names: DuckDB refuses any other)."""
        return render(query, relation, dialect, self.params)

    def shown(self, relation: Relation, dialect: str = SHOWN_DIALECT) -> str:
        """Both queries as a steward reads them (the sample runs only when the counts fail)."""
        text, _ = render(self.counts, relation, dialect, self.params, pretty=True, shown=True)
        if self.sample is not None:
            sample, _ = render(self.sample, relation, dialect, self.params, pretty=True, shown=True)
            heading = (
                "the worst offenders, each with the violation count"
                if self.sample_totals
                else "only when the counts fail: the worst offenders"
            )
            text += f";\n\n-- {heading}\n" + sample
        return text


def render(
    query: exp.Query,
    relation: Relation,
    dialect: str,
    params: Mapping[str, Any] | None = None,
    pretty: bool = False,
    shown: bool = False,
) -> tuple[str, dict[str, Any]]:
    """``query`` with ``snapshot`` (and ``parent``, when it reads it) defined as the
    relation's sources, as SQL in ``dialect``, and the bound values it names (all of them,
    unless it is only ``shown``, its values bound at run time)."""
    tree = query.copy()
    read = {table.name for table in tree.find_all(exp.Table)}
    streamed = dialect in STREAMED_CTE_DIALECTS
    tables = [_cte(SNAPSHOT, relation.tree, streamed)]
    bound = {**relation.params, **(params or {})}
    if relation.reference is not None and PARENT in read:
        tables.append(_cte(PARENT, relation.reference.tree, streamed))
        bound = {**relation.reference.params, **bound}
    for order in tree.find_all(exp.Order):  # NULLs sort last everywhere, as in DuckDB
        order.set("expressions", [_nulls_last(key) for key in order.expressions])
    tree = tree.transform(_counted_where, dialect, copy=False)
    own = tree.args.get("with_")
    tree.set("with_", exp.With(expressions=[*tables, *(own.expressions if own else [])]))
    named = {node.name for node in tree.find_all(exp.Placeholder)}
    missing = named - bound.keys()
    if missing and not shown:
        raise ValueError(f"query names unbound parameter(s) {', '.join(sorted(missing))}")
    return tree.sql(dialect=dialect, pretty=pretty), {k: bound[k] for k in named - missing}


def _nulls_last(key: exp.Expression) -> exp.Ordered:
    ordered = key if isinstance(key, exp.Ordered) else exp.Ordered(this=key)
    ordered.set("nulls_first", False)
    return ordered


def _cte(name: str, source: exp.Query, streamed: bool) -> exp.CTE:
    return exp.CTE(
        this=source.copy(),
        alias=exp.TableAlias(this=exp.to_identifier(name)),
        materialized=False if streamed else None,
    )


@cache
def shown_relation() -> Relation:
    """How a compiled control is shown to people (lesson page, assertion logic): the snapshot
    file (and a parent's, for a control checked against one) is bound at run time. Built on
    first use: parsing loads the DuckDB dialect, which importing this module does not need."""
    return Relation.of(
        "SELECT * FROM read_parquet($snapshot)",
        reference=Relation.of("SELECT * FROM read_parquet($reference)"),
    )


def shown_sql(
    query: ControlQuery,
    relation: Relation | None = None,
    dialect: str = SHOWN_DIALECT,
) -> str:
    """A compiled control as a steward reads it."""
    return query.shown(relation or shown_relation(), dialect)


def indent(sql: str, spaces: int = 4) -> str:
    """Indent a multi-line SQL fragment so nested queries stay readable."""
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in sql.splitlines())
