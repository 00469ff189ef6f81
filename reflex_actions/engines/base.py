"""The contract every engine implements (DESIGN §8).

An engine reads a target (a file, a table, a table's partition, a lakehouse table's snapshot)
as a relation and runs a control's query trees on it, rendered in its dialect. Evaluation is
the same for every engine: the counts first, the sample only when they fail, so a passing check
costs what its cheapest query costs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from reflex_actions.engines.rendering import RenderedControl, rendered
from reflex_actions.errors import ReflexError, SnapshotUnreadableError
from reflex_actions.sql import SNAPSHOT, Relation, column, exp, param

if TYPE_CHECKING:
    from reflex_actions.controls import Control


class EngineError(ReflexError):
    """An engine that cannot be found, configured or connected to."""


@dataclass(frozen=True)
class FileTarget:
    """A Parquet or CSV file: one snapshot, its id the file name without the extension; or one
    partition of it read as a table: the rows whose ``partition_column`` holds ``partition``
    (the value as text), its id the partition."""

    path: Path
    partition_column: str | None = None
    partition: str | None = None

    @property
    def snapshot_id(self) -> str:
        return self.partition if self.partition is not None else self.path.stem

    @property
    def shown(self) -> str:
        if self.partition_column is None:
            return str(self.path)
        return f"{self.path} where {self.partition_column} = {self.partition}"


@dataclass(frozen=True)
class TableTarget:
    """A table by its name in the engine's catalog (a DataHub urn's name, ``db.schema.table``),
    or one partition of it: the rows whose ``partition_column`` holds ``partition``."""

    name: str
    partition_column: str | None = None
    partition: str | None = None

    @property
    def snapshot_id(self) -> str:
        return self.partition if self.partition is not None else "live"

    @property
    def shown(self) -> str:
        if self.partition_column is None:
            return self.name
        return f"{self.name} where {self.partition_column} = {self.partition}"

    def parts(self) -> list[str]:
        """The name's dotted parts (database, schema, table), each checked non-empty."""
        parts = self.name.split(".")
        if not 1 <= len(parts) <= 3 or any(not part.strip() or "\x00" in part for part in parts):
            raise EngineError(
                f"table name {self.name[:200]!r} is not [database.][schema.]table "
                "(one to three non-empty dotted parts)"
            )
        return parts


@dataclass(frozen=True)
class IcebergTarget:
    """An Apache Iceberg table of a pyiceberg catalog, at one snapshot (the current when None)."""

    catalog: str
    table: str
    snapshot: int | None = None

    @property
    def snapshot_id(self) -> str:
        return str(self.snapshot) if self.snapshot is not None else "current"

    @property
    def shown(self) -> str:
        at = f"@{self.snapshot}" if self.snapshot is not None else ""
        return f"iceberg:{self.catalog}/{self.table}{at}"


@dataclass(frozen=True)
class DeltaTarget:
    """A Delta Lake table at one version (the latest when None)."""

    path: str
    version: int | None = None

    @property
    def snapshot_id(self) -> str:
        return str(self.version) if self.version is not None else "latest"

    @property
    def shown(self) -> str:
        at = f"@v{self.version}" if self.version is not None else ""
        return f"delta:{self.path}{at}"


Target = FileTarget | TableTarget | IcebergTarget | DeltaTarget


@dataclass(frozen=True)
class Evaluation:
    """A control's raw result on one target: counts, the raw sample rows (worst first; empty
    when it passed) and the measures row of a control reporting one."""

    rows_scanned: int
    violation_count: int
    sample: list[tuple[Any, ...]]
    measures: tuple[Any, ...] | None


def table_source(target: TableTarget, parts: Sequence[str] | None = None) -> exp.Select:
    """``SELECT * FROM "db"."schema"."table"``, every part quoted by the dialect it is
    rendered in (a partition's filter is :func:`partition_of`'s)."""
    names = list(parts if parts is not None else target.parts())
    table = exp.Table(this=exp.to_identifier(names[-1], quoted=True))
    if len(names) > 1:
        table.set("db", exp.to_identifier(names[-2], quoted=True))
    if len(names) > 2:
        table.set("catalog", exp.to_identifier(names[-3], quoted=True))
    return exp.select(exp.Star()).from_(table)


def needed_columns(target: FileTarget | TableTarget, required: Sequence[str]) -> list[str]:
    """The columns a target must have: those a control requires, and its partition column."""
    partition = [target.partition_column] if target.partition_column is not None else []
    return list(dict.fromkeys([*required, *partition]))


def partition_of(relation: Relation, target: FileTarget | TableTarget, parameter: str) -> Relation:
    """The relation's rows holding the target's partition, the value bound as text under
    ``<parameter>_partition`` (a parent's partition beside a child's takes another name) and
    compared as the engine casts it to the column's type; the relation itself for a whole
    target."""
    if target.partition_column is None:
        return relation
    name = f"{parameter}_partition"
    source = relation.tree.where(column(target.partition_column).eq(param(name)))
    return replace(
        relation,
        source=source,
        params={**relation.params, name: target.partition},
        row_count_is_free=False,  # a filter: the rows are counted, not read from a footer
        footer_rows=None,
    )


class Engine(ABC):
    """Where controls run: reads targets as relations, renders and runs query trees."""

    #: the name configs and the CLI use (``duckdb``, ``postgres``, ``spark``)
    name: ClassVar[str]
    #: the sqlglot dialect its queries are rendered in
    dialect: ClassVar[str]
    #: the target types it reads
    targets: ClassVar[tuple[type, ...]]
    #: its connection settings -> the environment variables they are read from by default
    #: (the CLI's; an action config names its own), and those it cannot connect without
    settings_from: ClassVar[dict[str, str]] = {}
    required_settings: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> Engine:
        """The engine connected by its settings (values read from environment variables)."""
        if settings:
            raise EngineError(f"the {cls.name} engine takes no connection settings")
        return cls()

    @abstractmethod
    def relation(
        self, target: Target, required: Sequence[str] = (), parameter: str = SNAPSHOT
    ) -> Relation:
        """How this engine reads ``target`` (its reader's values bound under names starting
        with ``parameter``), with its column types in DuckDB's names; raise SchemaDriftError
        when it lacks a ``required`` column, a SnapshotError when it cannot be read."""

    @abstractmethod
    def fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run one rendered query; raise SnapshotUnreadableError with the engine's reason."""

    def worker(self) -> Engine:
        """A handle for one of several concurrent evaluations sharing this engine's resources
        (a cursor on one DuckDB database, a connection to one server)."""
        return self

    def reading_ahead(self, targets: Sequence[Target], types: bool = True) -> Engine:
        """This engine, knowing ahead what it can learn of ``targets`` at once (the DuckDB
        engine: a history's Parquet schemas and row counts from one read of their footers;
        their row counts alone unless ``types``); itself for an engine that learns nothing
        so."""
        return self

    def close(self) -> None:  # noqa: B027 - most engines hold nothing to release
        """Release what the engine opened."""

    def supports(self, target: Target) -> bool:
        return isinstance(target, self.targets)

    def evaluate(self, control: Control, relation: Relation, sample_size: int) -> Evaluation:
        """The control's counts on ``relation``, and its sample only when they fail (or, for a
        control whose sample carries its violation count, the row count and the sample)."""
        query = rendered(control, relation, sample_size, self.dialect)
        if query.sample_totals and relation.footer_rows is not None:
            # its counts are the row count alone, which the footer read ahead says
            return self.judged(control, relation, query, (relation.footer_rows,))
        return self.judged(control, relation, query, self.counts(relation, query))

    def counts(self, relation: Relation, query: RenderedControl) -> tuple[Any, ...]:
        """The one row ``query``'s counts give on ``relation``: its ``settled`` query's row
        when it gives one (no row read), else its counts query's."""
        if query.settled is not None:
            rows = self.fetch(query.settled.sql, query.settled.bind(relation, query.params))
            if len(rows) == 1:
                return rows[0]
            if rows:
                raise SnapshotUnreadableError(
                    f"a control's settled counts returned {len(rows)} rows, not 0 or 1"
                )
        rows = self.fetch(query.counts.sql, query.counts.bind(relation, query.params))
        if len(rows) != 1:
            raise SnapshotUnreadableError(f"a control's counts returned {len(rows)} rows, not 1")
        return rows[0]

    def judged(
        self,
        control: Control,
        relation: Relation,
        query: RenderedControl,
        counts: tuple[Any, ...],
    ) -> Evaluation:
        """The evaluation from the counts row ``query`` gave on ``relation``: the sample is
        fetched only when they fail."""
        if query.sample_totals and query.sample is not None:
            (rows_scanned,) = counts
            sampled = self.fetch(query.sample.sql, query.sample.bind(relation, query.params))
            violation_count = int(sampled[0][-1]) if sampled else 0
            failed = violation_count > control.allowed_violations(rows_scanned)
            sample = [row[:-1] for row in sampled] if failed else []
            return Evaluation(int(rows_scanned), violation_count, sample, None)
        rows_scanned, violation_count, *measured = counts
        measures = tuple(measured) if measured else None
        sample: list[tuple[Any, ...]] = []
        if violation_count > control.allowed_violations(rows_scanned):
            if query.sample is not None:
                sample = self.fetch(query.sample.sql, query.sample.bind(relation, query.params))
                if query.sample_counted:
                    sample = [(*row, violation_count) for row in sample]
            elif query.sample_is_measures and measures is not None:
                sample = [measures]
        return Evaluation(int(rows_scanned), int(violation_count), sample, measures)
