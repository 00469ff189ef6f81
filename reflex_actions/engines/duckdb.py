"""The embedded default engine: DuckDB on Parquet and CSV files (and rows built in memory).

Files are read exactly as named (no globbing, no hive partitions; CSV as text), so every
snapshot of a history has the same types whatever DuckDB's sniffer would guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from reflex_actions.engines.base import Engine, FileTarget, Target
from reflex_actions.errors import SnapshotUnreadableError, first_line
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.sql import SNAPSHOT, Relation

if TYPE_CHECKING:
    import duckdb


class DuckDBEngine(Engine):
    name: ClassVar[str] = "duckdb"
    dialect: ClassVar[str] = "duckdb"
    targets: ClassVar[tuple[type, ...]] = (FileTarget,)

    def __init__(self, connection: duckdb.DuckDBPyConnection | None = None) -> None:
        import duckdb  # where a query runs: importing the engines starts none

        self._owned = connection is None
        self.connection = connection if connection is not None else duckdb.connect()

    def relation(
        self, target: Target, required: Sequence[str] = (), parameter: str = SNAPSHOT
    ) -> Relation:
        if not isinstance(target, FileTarget):
            raise SnapshotUnreadableError(f"the duckdb engine does not read {target.shown}")
        snapshot = SnapshotFile.from_path(target.path)
        types = snapshot.check_columns(self.connection, list(required))
        return snapshot.relation(parameter, types)

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
        return worker

    def close(self) -> None:
        if self._owned:
            self.connection.close()
