"""Snapshot files: locating them, reading their schema, and exposing them as SQL relations.

A snapshot is one Parquet or CSV file holding a dataset's rows at one run; its id is the file
name without the extension. CSV values are read as text so every file of a history has the same
types whatever DuckDB's sniffer would guess.

DuckDB reads a path as a glob pattern and ``key=value`` folders as columns; Reflex reads exactly
the one file it checked, so paths reach DuckDB with their glob characters escaped, hive
partitioning off, and the files a pattern names are checked to be that file alone. A Parquet
file's floating columns are read as possibly holding NaNs (``can_have_nan``): its statistics
leave NaNs out, by the format's spec, and DuckDB would otherwise prune the row groups of a filter
a NaN meets by them (duckdb/duckdb#25521), or drop a filter the statistics say every row meets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from reflex_actions.errors import (
    SchemaDriftError,
    SnapshotNotFoundError,
    SnapshotUnreadableError,
    first_line,
)
from reflex_actions.sql import Relation, quote_identifier

# DuckDB is imported where a query runs: defining the kinds and controls (all that
# `control compile` needs) starts no engine.
if TYPE_CHECKING:
    import duckdb


def duckdb_connection(**config: Any) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with ``config``, drawing no progress bar: DuckDB's Python
    client prints one to stdout for a query over two seconds, which corrupts a command's JSON
    (``control run --json`` on a slow snapshot). Every connection Reflex opens is made here."""
    import duckdb

    connection = duckdb.connect(config=config)
    connection.execute("SET enable_progress_bar = false")  # a setting of the client: cursors too
    return connection


SnapshotFormat = Literal["parquet", "csv"]

FORMATS_BY_SUFFIX: dict[str, SnapshotFormat] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
}


#: Column holding the source file path when several snapshots are read as one relation.
FILE_COLUMN = "__reflex_file"

#: Characters DuckDB's file globbing gives a meaning to.
GLOB_CHARACTERS = re.compile(r"[*?\[]")


def exact_file_pattern(path: Path) -> str:
    """The DuckDB path pattern matching ``path`` and nothing else: each glob character becomes a
    one-character class (``l*nkdir`` -> ``l[*]nkdir``)."""
    return GLOB_CHARACTERS.sub(lambda match: f"[{match.group()}]", str(path))


def reader_call(snapshot_format: SnapshotFormat, parameter: str, *, many: bool = False) -> str:
    """The DuckDB table function reading the file(s) bound to ``$parameter``.

    With ``many``, the files are read as one table with columns matched by name and each row
    tagged with its file in :data:`FILE_COLUMN`.
    """
    arguments = [f"${parameter}", "hive_partitioning = false"]
    if snapshot_format == "parquet":
        arguments += ["can_have_nan = true"]
    if snapshot_format == "csv":
        arguments += ["header = true", "all_varchar = true"]
    if many:
        arguments += [f"filename = '{FILE_COLUMN}'", "union_by_name = true"]
    function = "read_parquet" if snapshot_format == "parquet" else "read_csv"
    return f"{function}({', '.join(arguments)})"


@dataclass(frozen=True)
class FilesQuery:
    """Several snapshot files read as one DuckDB table, each row tagged with its file in
    :data:`FILE_COLUMN` (how drafting reads a whole history's evidence in one query)."""

    sql: str
    params: dict[str, list[str]]


def files_relation(snapshots: list[SnapshotFile], columns: list[str]) -> FilesQuery:
    """Several snapshots as one table tagged by file, projecting only ``columns``.

    Parquet and CSV files are read by one reader each and combined by column name, so a whole
    history's evidence is read in one query.
    """
    projection = ", ".join(quote_identifier(name) for name in [FILE_COLUMN, *columns])
    selects: list[str] = []
    params: dict[str, list[str]] = {}
    for snapshot_format in ("parquet", "csv"):
        paths = [s.pattern for s in snapshots if s.format == snapshot_format]
        if paths:
            parameter = f"{snapshot_format}_files"
            params[parameter] = paths
            selects.append(
                f"SELECT {projection} FROM {reader_call(snapshot_format, parameter, many=True)}"
            )
    return FilesQuery(sql="\nUNION ALL BY NAME\n".join(selects), params=params)


@dataclass(frozen=True)
class SnapshotFile:
    path: Path
    format: SnapshotFormat

    @property
    def snapshot_id(self) -> str:
        return self.path.stem

    @cached_property
    def read_path(self) -> str:
        """The file DuckDB reads: the resolved path (what a reader's filename column shows),
        resolved once (a resolve costs a system call a folder)."""
        return str(self.path.resolve())

    @cached_property
    def pattern(self) -> str:
        """What DuckDB is given to read exactly :attr:`read_path` (made once: a backtest binds
        it for each query on the file)."""
        return exact_file_pattern(Path(self.read_path))

    @classmethod
    def from_path(cls, path: str | Path) -> SnapshotFile:
        """A snapshot at ``path``; raises when it is missing or not Parquet/CSV."""
        snapshot_path = Path(path)
        if snapshot_path.is_dir():  # a folder named like a file: say what it is
            raise SnapshotUnreadableError(f"{snapshot_path} is a folder, not a snapshot file")
        snapshot_format = FORMATS_BY_SUFFIX.get(snapshot_path.suffix.lower())
        if snapshot_format is None:
            raise SnapshotUnreadableError(
                f"{snapshot_path}: unsupported snapshot format {snapshot_path.suffix!r}; "
                f"expected one of {', '.join(sorted(FORMATS_BY_SUFFIX))}"
            )
        if not snapshot_path.is_file():
            raise SnapshotNotFoundError(f"snapshot not found: {snapshot_path}")
        return cls(path=snapshot_path, format=snapshot_format)

    def relation(
        self,
        parameter: str = "snapshot",
        types: Mapping[str, str] | None = None,
        footer_rows: int | None = None,
    ) -> Relation:
        """The whole snapshot as a relation, its path bound as ``$parameter`` (a parent's
        snapshot read beside a child's takes another name), with its column types and its
        footer's row count if known."""
        return Relation(
            source=self.reader_sql(parameter),
            params={parameter: self.pattern},
            types=dict(types or {}),
            text_only=self.format == "csv",
            filters_see_nans=True,  # the reader is told NaNs may hide from the statistics
            row_count_is_free=self.format == "parquet",  # a footer holds it
            footer_rows=footer_rows,
        )

    def reader_sql(self, parameter: str = "snapshot") -> str:
        """The reader as DuckDB text (the relation's source, what DESCRIBE reads)."""
        return f"SELECT * FROM {reader_call(self.format, parameter)}"

    def column_types(self, connection: duckdb.DuckDBPyConnection) -> dict[str, str]:
        """Column name -> DuckDB type (reads the Parquet footer or sniffs the CSV header),
        once DuckDB is known to read this file and no other."""
        import duckdb

        try:
            self._check_reads_only_itself(connection)
            described = connection.execute(
                f"DESCRIBE {self.reader_sql()}", {"snapshot": self.pattern}
            ).fetchall()
        except duckdb.Error as error:
            raise SnapshotUnreadableError(
                f"cannot read snapshot {self.path}: {first_line(error)}"
            ) from None
        return {row[0]: row[1] for row in described}

    def columns(self, connection: duckdb.DuckDBPyConnection) -> list[str]:
        """Column names of the snapshot."""
        return list(self.column_types(connection))

    def _check_reads_only_itself(self, connection: duckdb.DuckDBPyConnection) -> None:
        """The files DuckDB expands :attr:`pattern` to must be exactly :attr:`read_path` (e.g. a
        path with both a backslash and a glob character cannot be matched exactly). A path
        without glob characters is read as it is: nothing to check."""
        if not GLOB_CHARACTERS.search(self.read_path):
            return
        matched = connection.execute("SELECT file FROM glob($pattern)", {"pattern": self.pattern})
        files = [file for (file,) in matched.fetchall()]
        if files != [self.read_path]:
            raise SnapshotUnreadableError(
                f"snapshot {self.path}: DuckDB would read {len(files)} file(s) for it, "
                "not exactly this one"
            )

    def check_columns(
        self,
        connection: duckdb.DuckDBPyConnection,
        required: list[str],
        known: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The snapshot's column types (``known`` when they were read ahead, see
        :func:`read_ahead`); raise SchemaDriftError when it lacks any ``required``
        column."""
        available = dict(known) if known is not None else self.column_types(connection)
        missing = [name for name in required if name not in available]
        if missing:
            raise SchemaDriftError(str(self.path), missing, list(available))
        return available


#: Key-value metadata of a Parquet footer that DuckDB never reads a type from: pandas' own
#: (its index ranges differ between files of one schema but different row counts).
_TYPELESS_METADATA = frozenset({b"pandas"})


@dataclass(frozen=True)
class ReadAhead:
    """What a Parquet file's footer says, read ahead: its column types (None when they were
    not read) and its row count."""

    types: dict[str, str] | None
    rows: int


def read_ahead(
    connection: duckdb.DuckDBPyConnection, snapshots: Sequence[SnapshotFile], types: bool = True
) -> dict[str, ReadAhead]:
    """Read path -> column types and row count of many Parquet snapshots, from one read of all
    their footers.

    A history's files share a schema: a DESCRIBE of each costs about what a count of 100k rows
    does. Files whose footers hold the same schema (every element, as ``parquet_schema`` lists
    it, and the key-value metadata) are read with the same types, so one DESCRIBE of a file of
    each schema gives them all. Left out, to be described on their own: CSV files, paths with
    glob characters (their expansion is checked), and every file when any footer cannot be
    read (each file then says why). The row count is the sum of the row groups' counts, as a
    scan counts them. Without ``types`` the row counts alone are read (no schema, no
    DESCRIBE).
    """
    import duckdb

    by_file = {
        s.read_path: s
        for s in snapshots
        if s.format == "parquet" and not GLOB_CHARACTERS.search(s.read_path)
    }
    files = list(by_file)
    if not files:
        return {}
    try:
        elements = (
            connection.execute(
                "SELECT * EXCLUDE (file_name), file_name FROM parquet_schema($files) "
                "ORDER BY file_name, column_id",
                {"files": files},
            ).fetchall()
            if types
            else []
        )
        metadata = (
            connection.execute(
                "SELECT file_name, key, value FROM parquet_kv_metadata($files) "
                "ORDER BY file_name, key, value",
                {"files": files},
            ).fetchall()
            if types
            else []
        )
        groups = connection.execute(
            "SELECT file_name, sum(row_group_num_rows) FROM (SELECT DISTINCT file_name, "
            "row_group_id, row_group_num_rows FROM parquet_metadata($files)) GROUP BY file_name",
            {"files": files},
        ).fetchall()
    except duckdb.Error:
        return {}
    rows = {file: int(count) for file, count in groups}  # a file of no row group: none
    if not types:
        if not rows.keys() <= set(files):
            return {}  # a file named otherwise than given: nothing is assumed of it
        return {file: ReadAhead(None, rows.get(file, 0)) for file in files}
    schemas: dict[str, list[tuple[object, ...]]] = {file: [] for file in files}
    for *element, file in elements:
        if file not in schemas:
            return {}  # a file named otherwise than given: nothing is assumed of it
        schemas[file].append(tuple(element))
    for file, key, value in metadata:
        if file not in schemas:
            return {}
        if key not in _TYPELESS_METADATA:
            schemas[file].append((key, value))
    known: dict[str, ReadAhead] = {}
    described: dict[tuple[tuple[object, ...], ...], dict[str, str]] = {}
    for file, schema in schemas.items():
        fingerprint = tuple(schema)
        if fingerprint not in described:
            try:
                described[fingerprint] = by_file[file].column_types(connection)
            except SnapshotUnreadableError:
                continue  # described again on its own, where it says why
        known[file] = ReadAhead(described[fingerprint], rows.get(file, 0))
    return known
