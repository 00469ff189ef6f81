"""The scale-out engine: Spark SQL over the tables of a session's catalog and over files.

Local mode in tests (``local[2]``); a real cluster is configuration: a ``master`` URL (what
``spark-submit --master`` takes) or a Spark Connect URL (``sc://host:15002``). Files are read
exactly as named, as the DuckDB engine reads them: glob characters escaped, no partition
discovery, CSV as text with a header. Spark SQL has no reader function taking options, so a
file is read by the DataFrame reader and queried as a temporary view.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from reflex_actions.engines.base import (
    Engine,
    EngineError,
    FileTarget,
    TableTarget,
    Target,
    needed_columns,
    partition_of,
    table_source,
)
from reflex_actions.errors import (
    SchemaDriftError,
    SnapshotNotFoundError,
    SnapshotUnreadableError,
    first_line,
)
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.sql import SNAPSHOT, Relation

# PySpark is imported where a session starts or a query runs: importing the engines (as the
# registry does to name them) starts no JVM.
if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: The master a session is started with when none is configured: two local cores.
LOCAL_MASTER = "local[2]"
SPARK_CONNECT_SCHEME = "sc://"
#: How often a Connect client retries its first call while its server cannot be reached.
CONNECT_START_RETRIES = 3
SESSION_TIME_ZONE = "spark.sql.session.timeZone"
#: How much of Spark's reason an error carries (its messages can name whole query plans).
MAX_REASON = 500
#: Characters Hadoop's path globbing gives a meaning to (each is escaped with a backslash).
HADOOP_GLOB_CHARACTERS = re.compile(r"[\\*?\[\]{}]")
#: Spark's error condition for a table (or view) its catalog does not have.
TABLE_NOT_FOUND = "TABLE_OR_VIEW_NOT_FOUND"


#: How a local session is configured beyond its master and clock.
LOCAL_SESSION = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def session_builder(
    master: str | None = None, remote: str | None = None, warehouse: str | Path | None = None
) -> SparkSession.Builder:
    """How a session is started: on ``master`` (``local[2]`` unless given; a local driver
    listens on loopback only), or a Spark Connect client of ``remote``; a local session keeps
    its tables in ``warehouse`` when given (a Connect server has its own). Its clock is UTC
    (a Connect client's is set once it reaches its server: see :func:`connect_session`)."""
    from pyspark.sql import SparkSession

    if remote is not None:
        if master is not None or warehouse is not None:
            raise EngineError(
                "a Spark Connect URL names a server with its own master and warehouse: "
                "give either the URL or a master and warehouse"
            )
        if not remote.startswith(SPARK_CONNECT_SCHEME):
            raise EngineError(
                f"Spark Connect URL {shown_remote(remote)!r} does not start with "
                f"{SPARK_CONNECT_SCHEME}"
            )
        # Connect's own builder: PySpark's general one refuses a Connect client beside a local
        # session in the same process, and marks the whole process as Connect-only
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        return ConnectSession.builder.remote(remote)
    # times in UTC: a time without a zone is UTC to every engine (a freshness age must not move
    # with the driver's zone)
    builder = (
        SparkSession.builder.appName("datahub-reflex")
        .config(SESSION_TIME_ZONE, "UTC")
        .master(master or LOCAL_MASTER)
    )
    if (master or LOCAL_MASTER).startswith("local"):
        # a local session listens on loopback only, serves no web UI (a port open to nobody's
        # use) and draws no progress bar over the CLI's or the action's output
        for setting, value in LOCAL_SESSION.items():
            builder = builder.config(setting, value)
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", str(Path(warehouse).resolve()))
    return builder


def shown_remote(remote: str) -> str:
    """A Spark Connect URL as an error may show it: scheme, host and port, never its
    parameters (``sc://host:15002/;token=...`` carries a secret), bounded."""
    return remote.split("/;", 1)[0].split(";", 1)[0][:200]


def connect_session(builder: SparkSession.Builder, remote: str) -> SparkSession:
    """A new Spark Connect client session of ``remote``, its clock set to UTC by its first call
    to the server, which is retried only a few times: Connect's own policy retries an
    unreachable server for ten minutes, a wait a control run must not hang in. Later calls
    keep Connect's retries (a cluster's transient failures)."""
    from pyspark.errors import PySparkException
    from pyspark.sql.connect.client.retries import DefaultPolicy

    try:
        session = builder.create()  # a client only: no call to the server yet
    except ValueError as error:  # PySpark's own and urllib's, of a URL they cannot parse
        raise EngineError(
            f"{shown_remote(remote)!r} is not a Spark Connect URL: {_reason(error)}"
        ) from None
    session.client.set_retry_policies([DefaultPolicy(max_retries=CONNECT_START_RETRIES)])
    try:
        session.conf.set(SESSION_TIME_ZONE, "UTC")
    except PySparkException as error:
        session.stop()
        raise EngineError(
            f"cannot reach Spark Connect server {shown_remote(remote)}: {_reason(error)}"
        ) from None
    session.client.set_retry_policies([DefaultPolicy()])
    return session


def duckdb_type(spark_type: str) -> str:
    """A Spark SQL type (as ``DataType.simpleString`` writes it) by DuckDB's name for it, the
    names every relation's types are given in (``string`` -> ``VARCHAR``, ``timestamp`` ->
    ``TIMESTAMP WITH TIME ZONE``); a type DuckDB has no name for keeps Spark's."""
    import duckdb

    try:
        return str(duckdb.type(exp.DataType.build(spark_type, dialect="spark").sql("duckdb")))
    except (SqlglotError, duckdb.Error):
        return spark_type.upper()


def exact_hadoop_path(path: str) -> str:
    """The Hadoop path pattern matching ``path`` and nothing else (``a[1].csv`` ->
    ``a\\[1\\].csv``): Spark's readers glob every path they are given."""
    return HADOOP_GLOB_CHARACTERS.sub(lambda match: "\\" + match.group(), path)


def view_name(snapshot: SnapshotFile) -> str:
    """The temporary view a file is queried as: one per file and format, so concurrent
    evaluations of different files never share one."""
    digest = hashlib.sha256(f"{snapshot.format}:{snapshot.read_path}".encode()).hexdigest()
    return f"reflex_file_{digest[:24]}"


#: PySpark logs every failed query at ERROR, with its stack, as JSON on stderr (a table not
#: found included); the engine raises the same failure itself, once, as a Reflex error.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


class SparkEngine(Engine):
    name: ClassVar[str] = "spark"
    dialect: ClassVar[str] = "spark"
    targets: ClassVar[tuple[type, ...]] = (TableTarget, FileTarget)
    settings_from: ClassVar[dict[str, str]] = {
        "master": "REFLEX_SPARK_MASTER",
        "remote": "REFLEX_SPARK_REMOTE",
        "warehouse": "REFLEX_SPARK_WAREHOUSE",
    }

    def __init__(self, session: SparkSession, *, owned: bool = False) -> None:
        """An engine on ``session``; it stops the session on close only when ``owned``."""
        for name in QUERY_CONTEXT_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self.session = session
        self._owned = owned
        self._views: set[str] = set()

    @classmethod
    def from_config(
        cls,
        master: str | None = None,
        remote: str | None = None,
        warehouse: str | Path | None = None,
    ) -> SparkEngine:
        """An engine on a session started as configured (see :func:`session_builder`): a local
        or cluster session already running in this process is used, and left running on close;
        a Connect URL gets a client session of its own (no JVM starts here), ended on close."""
        from pyspark.errors import PySparkException
        from pyspark.sql import SparkSession

        builder = session_builder(master, remote, warehouse)
        if remote is not None:  # a server-side session of its own, ended on close
            return cls(connect_session(builder, remote), owned=True)
        running = SparkSession.getActiveSession()
        try:
            session = builder.getOrCreate()
        except (PySparkException, OSError) as error:
            where = master or LOCAL_MASTER
            raise EngineError(f"cannot start Spark on {where[:200]}: {_reason(error)}") from None
        return cls(session, owned=running is None)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> SparkEngine:
        """Started as its settings say (all optional: a local session on two cores)."""
        return cls.from_config(**settings)

    def relation(
        self, target: Target, required: Sequence[str] = (), parameter: str = SNAPSHOT
    ) -> Relation:
        """A table, a file, or one partition of either: the rows whose partition column holds
        the partition's value (bound as text under ``<parameter>_partition``, compared as
        Spark casts it to the column's type)."""
        if isinstance(target, TableTarget):
            source, types = self._table(target)
            text_only = False
        elif isinstance(target, FileTarget):
            snapshot = SnapshotFile.from_path(target.path)
            source, types = self._file(snapshot)
            text_only = snapshot.format == "csv"
        else:
            raise SnapshotUnreadableError(f"the spark engine does not read {target.shown}")
        missing = [name for name in needed_columns(target, required) if name not in types]
        if missing:
            raise SchemaDriftError(target.shown[:300], missing, list(types))
        # not filters_see_nans: Spark prunes Parquet row groups by statistics that leave NaNs out
        whole = Relation(source=source, types=types, text_only=text_only)
        return partition_of(whole, target, parameter)

    def _table(self, target: TableTarget) -> tuple[exp.Select, dict[str, str]]:
        """The whole catalog table, and its column types."""
        source = table_source(TableTarget(target.name))
        try:
            schema = self.session.sql(source.sql(dialect=self.dialect)).schema
        except _spark_errors() as error:
            if _condition(error) == TABLE_NOT_FOUND:
                raise SnapshotNotFoundError(
                    f"table {target.name[:200]!r} not found in the Spark catalog"
                ) from None
            raise SnapshotUnreadableError(
                f"cannot read table {target.name[:200]!r}: {_reason(error)}"
            ) from None
        return source, _types(schema)

    def _file(self, snapshot: SnapshotFile) -> tuple[exp.Select, dict[str, str]]:
        """``SELECT * FROM`` the file's temporary view (registered again on every read, so a
        file rewritten since is read as it is now), and its column types."""
        view = view_name(snapshot)
        frame = self._frame(snapshot)
        frame.createOrReplaceTempView(view)
        self._views.add(view)
        source = exp.select(exp.Star()).from_(exp.Table(this=exp.to_identifier(view, quoted=True)))
        return source, _types(frame.schema)

    def _frame(self, snapshot: SnapshotFile) -> DataFrame:
        """The file as DuckDB's reader reads it: Parquet as written; CSV with a header, every
        column text, quotes doubled inside quoted values, which may span lines."""
        reader = self.session.read.format(snapshot.format)
        if snapshot.format == "csv":
            reader = reader.options(header=True, inferSchema=False, multiLine=True, escape='"')
        try:
            return reader.load(exact_hadoop_path(snapshot.read_path))
        except _spark_errors() as error:
            raise SnapshotUnreadableError(
                f"cannot read snapshot {snapshot.path}: {_reason(error)}"
            ) from None

    def fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run ``sql`` with its ``:name`` markers bound (a list's as an array of its values)."""
        sql, args = _lists_expanded(sql, params)
        try:
            rows = self.session.sql(sql, args=args).collect()
        except _spark_errors() as error:
            raise SnapshotUnreadableError(_reason(error)) from None
        return [tuple(row) for row in rows]

    def worker(self) -> SparkEngine:
        """A handle on the same session (Spark runs concurrent queries of one session side by
        side), closed without stopping it."""
        return SparkEngine(self.session)

    def close(self) -> None:
        """Drop the views this engine registered; stop the session if it started it."""
        if self._owned:
            self.session.stop()
            return
        for view in self._views:
            self.session.catalog.dropTempView(view)
        self._views.clear()


def _types(schema: StructType) -> dict[str, str]:
    return {field.name: duckdb_type(field.dataType.simpleString()) for field in schema}


_QUOTED = (TokenType.IDENTIFIER, TokenType.STRING)


def _lists_expanded(sql: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``sql`` with each list's marker as ``array(:name__0, :name__1, ...)``, one bound value
    per element: Spark binds a list only as a literal of one type with no NULL in it. Markers
    are found by Spark's tokens (never inside a quoted name or a string)."""
    lists = {name: value for name, value in params.items() if isinstance(value, (list, tuple))}
    args = {name: value for name, value in params.items() if name not in lists}
    if not lists:
        return sql, args
    tokens = sqlglot.Dialect.get_or_raise(SparkEngine.dialect).tokenize(sql)
    pieces, done = [], 0
    for colon, name in itertools.pairwise(tokens):
        marker = colon.token_type is TokenType.COLON and name.start == colon.end + 1
        if marker and name.token_type not in _QUOTED and name.text in lists:
            elements = [f"{name.text}__{i}" for i in range(len(lists[name.text]))]
            args.update(zip(elements, lists[name.text], strict=True))
            markers = ", ".join(f":{element}" for element in elements)
            pieces += [sql[done : colon.start], f"array({markers})"]
            done = name.end + 1
    return "".join([*pieces, sql[done:]]), args


def _spark_errors() -> tuple[type[BaseException], ...]:
    """What a Spark call raises: PySpark's errors, or a JVM error PySpark did not translate."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JJavaError)


def _condition(error: BaseException) -> str | None:
    get_condition = getattr(error, "getCondition", None)
    return get_condition() if get_condition is not None else None


def _reason(error: BaseException) -> str:
    """Spark's reason, first line only and bounded (a JVM error's own message, not py4j's
    "An error occurred while calling o56.parquet"; a Connect client's failed gRPC call's
    details, not its "<_InactiveRpcError of RPC that terminated with:")."""
    java = getattr(error, "java_exception", None)
    call = _failed_call(error)
    if java is not None:
        reason = first_line(Exception(java.toString()))
    elif call is not None:
        reason = first_line(Exception(call.details()))
    else:
        reason = first_line(error)
    return reason[:MAX_REASON]


def _failed_call(error: BaseException) -> Any:
    """The failed gRPC call (with its ``details()``) a Connect client's error was raised from,
    through its retries, or None."""
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if callable(getattr(cause, "details", None)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
