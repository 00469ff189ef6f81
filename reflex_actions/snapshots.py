"""Snapshot files: locating them, reading their schema, and exposing them as SQL relations.

A snapshot is one Parquet or CSV file holding a dataset's rows at one run; its id is the file
name without the extension. CSV values are read as text so every file of a history has the same
types whatever DuckDB's sniffer would guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from reflex_actions.errors import (
    SchemaDriftError,
    SnapshotNotFoundError,
    SnapshotUnreadableError,
    first_line,
)
from reflex_actions.sql import Relation, quote_identifier

SnapshotFormat = Literal["parquet", "csv"]

FORMATS_BY_SUFFIX: dict[str, SnapshotFormat] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
}


#: Column holding the source file path when several snapshots are read as one relation.
FILE_COLUMN = "__reflex_file"


def reader_call(snapshot_format: SnapshotFormat, parameter: str, *, many: bool = False) -> str:
    """The DuckDB table function reading the file(s) bound to ``$parameter``.

    With ``many``, the files are read as one table with columns matched by name and each row
    tagged with its file in :data:`FILE_COLUMN`.
    """
    arguments = [f"${parameter}"]
    if snapshot_format == "csv":
        arguments += ["header = true", "all_varchar = true"]
    if many:
        arguments += [f"filename = '{FILE_COLUMN}'", "union_by_name = true"]
    function = "read_parquet" if snapshot_format == "parquet" else "read_csv"
    return f"{function}({', '.join(arguments)})"


def files_relation(snapshots: list[SnapshotFile], columns: list[str]) -> Relation:
    """Several snapshots as one relation partitioned by file, projecting only ``columns``.

    Parquet and CSV files are read by one reader each and combined by column name, so a whole
    history is evaluated in one query.
    """
    projection = ", ".join(quote_identifier(name) for name in [FILE_COLUMN, *columns])
    selects: list[str] = []
    params: dict[str, list[str]] = {}
    for snapshot_format in ("parquet", "csv"):
        paths = [str(s.path) for s in snapshots if s.format == snapshot_format]
        if paths:
            parameter = f"{snapshot_format}_files"
            params[parameter] = paths
            selects.append(
                f"SELECT {projection} FROM {reader_call(snapshot_format, parameter, many=True)}"
            )
    return Relation(
        sql="\nUNION ALL BY NAME\n".join(selects), params=params, partition_column=FILE_COLUMN
    )


@dataclass(frozen=True)
class SnapshotFile:
    path: Path
    format: SnapshotFormat

    @property
    def snapshot_id(self) -> str:
        return self.path.stem

    @classmethod
    def from_path(cls, path: str | Path) -> SnapshotFile:
        """A snapshot at ``path``; raises when it is missing or not Parquet/CSV."""
        snapshot_path = Path(path)
        snapshot_format = FORMATS_BY_SUFFIX.get(snapshot_path.suffix.lower())
        if snapshot_format is None:
            raise SnapshotUnreadableError(
                f"{snapshot_path}: unsupported snapshot format {snapshot_path.suffix!r}; "
                f"expected one of {', '.join(sorted(FORMATS_BY_SUFFIX))}"
            )
        if not snapshot_path.is_file():
            raise SnapshotNotFoundError(f"snapshot not found: {snapshot_path}")
        return cls(path=snapshot_path, format=snapshot_format)

    def relation(self) -> Relation:
        """The whole snapshot as a relation, its path bound as ``$snapshot``."""
        return Relation(
            sql=f"SELECT * FROM {reader_call(self.format, 'snapshot')}",
            params={"snapshot": str(self.path)},
        )

    def columns(self, connection: duckdb.DuckDBPyConnection) -> list[str]:
        """Column names of the snapshot (reads the Parquet footer or sniffs the CSV header)."""
        relation = self.relation()
        try:
            described = connection.execute(f"DESCRIBE {relation.sql}", relation.params).fetchall()
        except duckdb.Error as error:
            raise SnapshotUnreadableError(
                f"cannot read snapshot {self.path}: {first_line(error)}"
            ) from None
        return [row[0] for row in described]

    def check_columns(self, connection: duckdb.DuckDBPyConnection, required: list[str]) -> None:
        """Raise SchemaDriftError when the snapshot lacks any ``required`` column."""
        available = self.columns(connection)
        missing = [name for name in required if name not in available]
        if missing:
            raise SchemaDriftError(str(self.path), missing, available)
