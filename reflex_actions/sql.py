"""SQL building blocks shared by every control template.

Identifiers are always quoted and values always bound as named parameters: control specs and
snapshot schemas come from users and incident text, and must never be formatted into SQL raw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def quote_identifier(name: str) -> str:
    """Quote a column name for DuckDB, doubling embedded quotes."""
    if not name or "\x00" in name:
        raise ValueError(f"invalid column name {name!r}: empty or contains a NUL byte")
    return '"' + name.replace('"', '""') + '"'


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
    """A table a control reads: a SELECT over snapshot file(s), with its bound parameters.

    When ``partition_column`` is set the relation holds several snapshots and every control
    returns one result row per value of that column (used by the backtester to evaluate a whole
    history in one query). ``types`` are the engine's column types where known (a control may
    compare natively when two columns share one), and ``reference`` is the other table a control
    checks this one against (a child's parent snapshot), when the control has one.
    ``earlier_counts`` are the dataset's earlier row counts, for a control that needs them.
    """

    sql: str
    params: dict[str, Any] = field(default_factory=dict)
    partition_column: str | None = None
    types: Mapping[str, str] = field(default_factory=dict)
    reference: Relation | None = None
    #: the row counts of this dataset's earlier evaluations, oldest first (what a volume
    #: control judges a count against); empty when there are none
    earlier_counts: tuple[int, ...] = ()
    #: True when the reader reads every column as text (CSV): its types say nothing of the data
    text_only: bool = False
    #: the time the control is judged at (epoch milliseconds), for a control judging age
    as_of_ms: int | None = None
    #: what the catalog records of the table, for a control judged on metadata alone
    recorded: RecordedFacts | None = None

    def partition_select(self) -> str:
        """``"col", `` to lead a per-partition SELECT or GROUP BY list; empty when unpartitioned."""
        return f"{quote_identifier(self.partition_column)}, " if self.partition_column else ""

    def partition_suffix(self) -> str:
        """The GROUP BY / ORDER BY that makes an aggregate return one row per partition."""
        if not self.partition_column:
            return ""
        column = quote_identifier(self.partition_column)
        return f"\nGROUP BY {column}\nORDER BY {column}"


@dataclass(frozen=True)
class CompiledQuery:
    """A control compiled against a relation.

    The query returns the columns ``rows_scanned``, ``violation_count`` and ``sample`` (a list of
    row tuples, worst offenders first), preceded by the partition column when there is one. A
    control judging the whole table may return a fourth, ``measures``: one row tuple, read like
    a sample row, of what it measured whether it passed or not (an age, a count and bounds).
    """

    sql: str
    params: dict[str, Any]


def indent(sql: str, spaces: int = 4) -> str:
    """Indent a multi-line SQL fragment so nested queries stay readable."""
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in sql.splitlines())


#: How a compiled control is shown to people (lesson page, assertion logic): the snapshot file
#: (and a parent's, for a control checked against one) is bound at run time.
SHOWN_RELATION = Relation(
    sql="SELECT * FROM read_parquet($snapshot)",
    reference=Relation(sql="SELECT * FROM read_parquet($reference)"),
)
