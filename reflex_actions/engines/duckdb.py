"""The embedded default engine: DuckDB on Parquet and CSV files (and rows built in memory), and
on Iceberg and Delta tables read as Arrow.

Files are read exactly as named (no globbing, no hive partitions; CSV as text), so every
snapshot of a history has the same types whatever DuckDB's sniffer would guess. A lakehouse
table's snapshot or version is read as an Arrow table and registered on the engine's own
connection (a worker's cursor) under a name of its own, so concurrent workers never see each
other's. An engine holds one such table per parameter (the target's, a parent's beside it):
reading the next target under the same parameter releases the previous one, so a worker
judging one point after another holds one point's rows, and closing it releases them all.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from reflex_actions.engines.base import (
    DeltaTarget,
    Engine,
    FileTarget,
    IcebergTarget,
    Target,
    needed_columns,
    partition_of,
)
from reflex_actions.engines.lakehouse import LakehouseTarget, read_arrow
from reflex_actions.errors import SnapshotUnreadableError, first_line
from reflex_actions.snapshots import (
    FORMATS_BY_SUFFIX,
    ReadAhead,
    SnapshotFile,
    duckdb_connection,
    read_ahead,
)
from reflex_actions.sql import SNAPSHOT, Relation, exp

if TYPE_CHECKING:
    import duckdb

#: Numbers the Arrow tables registered in this process: each name is used once.
_REGISTERED = itertools.count()


class DuckDBEngine(Engine):
    name: ClassVar[str] = "duckdb"
    dialect: ClassVar[str] = "duckdb"
    targets: ClassVar[tuple[type, ...]] = (FileTarget, IcebergTarget, DeltaTarget)

    def __init__(self, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        self._owned = connection is None  # where a query runs: importing the engines starts none
        self.connection = connection if connection is not None else duckdb_connection()
        #: parameter -> the name of the Arrow table registered for it
        self._registered: dict[str, str] = {}
        #: path -> a Parquet file read ahead and what its footer says (:meth:`reading_ahead`)
        self._known: Mapping[Path, tuple[SnapshotFile, ReadAhead]] = {}

    def relation(
        self, target: Target, required: Sequence[str] = (), parameter: str = SNAPSHOT
    ) -> Relation:
        if isinstance(target, IcebergTarget | DeltaTarget):
            return self._lakehouse_relation(target, required, parameter)
        if not isinstance(target, FileTarget):
            raise SnapshotUnreadableError(f"the duckdb engine does not read {target.shown}")
        found = self._known.get(target.path)
        if found is None:
            snapshot = SnapshotFile.from_path(target.path)
            types = snapshot.check_columns(self.connection, needed_columns(target, required))
            return partition_of(snapshot.relation(parameter, types), target, parameter)
        snapshot, footer = found
        needed = needed_columns(target, required)
        if footer.types is None and not needed:  # its types not read ahead: none needed
            types: dict[str, str] = {}
        else:
            types = snapshot.check_columns(self.connection, needed, footer.types)
        relation = snapshot.relation(parameter, types, footer.rows)
        return partition_of(relation, target, parameter)

    def _lakehouse_relation(
        self, target: LakehouseTarget, required: Sequence[str], parameter: str
    ) -> Relation:
        """The snapshot or version as an Arrow table registered on this connection in place of
        the one read before under ``parameter``, with its column types as DuckDB reads them."""
        table = read_arrow(target, required)
        if parameter in self._registered:
            self.connection.unregister(self._registered.pop(parameter))
        name = f"reflex_{parameter}_{next(_REGISTERED)}"
        self.connection.register(name, table)
        self._registered[parameter] = name
        source = exp.select(exp.Star()).from_(exp.to_identifier(name, quoted=True))
        described = self.fetch(f"DESCRIBE {source.sql(dialect=self.dialect)}", {})
        types = {row[0]: row[1] for row in described}
        # an Arrow table in memory has no statistics: DuckDB's own filter sees every row
        return Relation(source=source, types=types, filters_see_nans=True)

    def fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        import duckdb

        try:
            return self.connection.execute(sql, dict(params)).fetchall()
        except duckdb.Error as error:
            raise SnapshotUnreadableError(first_line(error)) from None

    def worker(self) -> DuckDBEngine:
        """A cursor on the same database: one memory limit and spill folder bound them all."""
        worker = DuckDBEngine(self.connection.cursor())
        worker._owned = True
        worker._known = self._known
        return worker

    def reading_ahead(self, targets: Sequence[Target], types: bool = True) -> DuckDBEngine:
        """This engine knowing the column types (unless not ``types``: a control judged on a
        row count alone reads none) and row counts of the whole Parquet files among
        ``targets`` from one read of their footers (``read_ahead``), not one DESCRIBE and one
        count each."""
        files = {
            target.path: SnapshotFile(target.path, "parquet")
            for target in targets
            if isinstance(target, FileTarget)
            and FORMATS_BY_SUFFIX.get(target.path.suffix.lower()) == "parquet"
            and target.path.is_file()
        }
        footers = read_ahead(self.connection, list(files.values()), types)
        ahead = copy.copy(self)  # of the same class, on the same connection
        ahead._owned, ahead._registered = False, {}
        # each file found and resolved once here, not again for each point reading it
        ahead._known = {
            path: (snapshot, footers[snapshot.read_path])
            for path, snapshot in files.items()
            if snapshot.read_path in footers
        }
        return ahead

    def close(self) -> None:
        if self._owned:
            self.connection.close()
