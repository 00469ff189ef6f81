"""PostgreSQL: controls run inside the server, on a table or one partition of it (psycopg 3).

A table is named as its DataHub urn names it (``db.schema.table``, ``schema.table``, or a bare
``table`` found on the search path), every part a quoted identifier; its column types are read
from the catalog with bound values and given in DuckDB's names, as every engine gives them. Every
statement the engine runs is a transaction of its own, read-only from its start, with its own
statement timeout, and rolled back: nothing it calls (a view's function) can write, lift the
timeout or change a setting for the next statement. The connection string never appears in an
error: it may hold a password.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from sqlglot import exp
from sqlglot.errors import ParseError

from reflex_actions.engines.base import (
    Engine,
    EngineError,
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
from reflex_actions.sql import SNAPSHOT, Relation

if TYPE_CHECKING:
    import psycopg

#: How long one query may run before the server cancels it (seconds).
DEFAULT_STATEMENT_TIMEOUT_S = 300
#: How long connecting may take before it is an error (seconds).
CONNECT_TIMEOUT_S = 10
#: The longest statement timeout PostgreSQL takes (milliseconds, a 32-bit integer).
_MAX_TIMEOUT_MS = 2**31 - 1

# The catalog is read with bound values only: a table's name is data here, never SQL text. A
# control reads tables, partitioned tables, views, materialized views and foreign tables.
_DATABASE = "SELECT current_database()"
# The session's defaults, what a statement run on ``connection`` directly gets (the engine's own
# statements each begin with theirs, _BEGIN, and roll back what they changed). TimeZone UTC: a
# time without a zone is UTC to every engine (a TIMESTAMPTZ cast to a plain TIMESTAMP, as a
# freshness control's age does, would otherwise shift with the session's zone)
_SETTINGS = (
    "SELECT set_config('default_transaction_read_only', 'on', false), "
    "set_config('statement_timeout', %(timeout)s, false), "
    "set_config('TimeZone', 'UTC', false)"
)
# One statement's transaction, read-only from its start (no query in it can make it read-write)
# with its timeout armed when the statement starts. A function the statement calls may still
# change the session's settings (set_config: the read-only default, the timeout, the search
# path); the ROLLBACK after it undoes that. SET takes no bound value: the milliseconds are an
# int the engine computed.
_BEGIN = "BEGIN READ ONLY; SET LOCAL statement_timeout = {milliseconds:d}"
_COLUMNS = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_class AS c
LEFT JOIN pg_catalog.pg_attribute AS a
    ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = pg_catalog.to_regclass(
        pg_catalog.concat_ws(
            '.', pg_catalog.quote_ident(%(schema)s), pg_catalog.quote_ident(%(table)s)
        )
    )
    AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY a.attnum
"""

#: PostgreSQL's types (as sqlglot reads them) by the name DuckDB's DESCRIBE gives the same type.
_DUCKDB_NAMES = {
    exp.DataType.Type.SMALLINT: "SMALLINT",
    exp.DataType.Type.INT: "INTEGER",
    exp.DataType.Type.BIGINT: "BIGINT",
    exp.DataType.Type.FLOAT: "FLOAT",
    exp.DataType.Type.DOUBLE: "DOUBLE",
    exp.DataType.Type.BOOLEAN: "BOOLEAN",
    exp.DataType.Type.TEXT: "VARCHAR",
    exp.DataType.Type.VARCHAR: "VARCHAR",
    exp.DataType.Type.CHAR: "VARCHAR",
    exp.DataType.Type.BPCHAR: "VARCHAR",
    exp.DataType.Type.NAME: "VARCHAR",
    exp.DataType.Type.DATE: "DATE",
    exp.DataType.Type.TIME: "TIME",
    exp.DataType.Type.TIMETZ: "TIME WITH TIME ZONE",
    exp.DataType.Type.TIMESTAMP: "TIMESTAMP",
    exp.DataType.Type.TIMESTAMPTZ: "TIMESTAMP WITH TIME ZONE",
    exp.DataType.Type.INTERVAL: "INTERVAL",
    exp.DataType.Type.UUID: "UUID",
    exp.DataType.Type.VARBINARY: "BLOB",
    exp.DataType.Type.JSON: "JSON",
    exp.DataType.Type.JSONB: "JSON",
}

#: What a rendered query holds that may contain ``%(``: quoted identifiers and string literals
#: (their quotes doubled inside), and psycopg's named placeholders (group 1: the name).
_QUOTED_OR_PLACEHOLDER = re.compile(r"\"(?:[^\"]|\"\")*\"|'(?:[^']|'')*'|%\((\w+)\)s")


def duckdb_type(native: str) -> str:
    """A PostgreSQL column type (as ``format_type`` writes it) in DuckDB's name for it:
    ``character varying(64)`` -> ``VARCHAR``, ``numeric(10,2)`` -> ``DECIMAL(10,2)``; a type
    DuckDB has no name for (an enum, a domain) keeps its own name, upper-cased."""
    try:
        node = exp.DataType.build(native, dialect="postgres")
    except (ParseError, ValueError):
        return native.upper()
    return _duckdb_name(node)


def _duckdb_name(node: exp.DataType) -> str:
    if node.this == exp.DataType.Type.ARRAY and node.expressions:
        return _duckdb_name(node.expressions[0]) + "[]"
    if node.this == exp.DataType.Type.DECIMAL:
        digits = [part.sql() for part in node.expressions]
        # numeric(p) is numeric(p,0); an unconstrained numeric has no DuckDB DECIMAL that holds it
        return (
            f"DECIMAL({digits[0]},{digits[1] if len(digits) > 1 else 0})" if digits else "DECIMAL"
        )
    return _DUCKDB_NAMES.get(node.this) or node.sql("duckdb").upper()


def positional(sql: str, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """A query rendered with psycopg's ``%(name)s`` markers, as PostgreSQL's own ``$n``
    markers and their values in order: run as written, a ``%`` in a quoted column name or a
    modulo is never read as a marker."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:  # a quoted identifier or a string: kept as written
            return match.group(0)
        return f"${order.setdefault(name, len(order) + 1)}"

    text = _QUOTED_OR_PLACEHOLDER.sub(number, sql)
    missing = order.keys() - params.keys()
    if missing:
        raise SnapshotUnreadableError(
            f"query names unbound parameter(s) {', '.join(sorted(missing))}"
        )
    return text, [params[name] for name in order]


class PostgresEngine(Engine):
    """Controls run in a PostgreSQL server on a table, or the rows of one of its partitions."""

    name: ClassVar[str] = "postgres"
    dialect: ClassVar[str] = "postgres"
    targets: ClassVar[tuple[type, ...]] = (TableTarget,)
    settings_from: ClassVar[dict[str, str]] = {"url": "REFLEX_POSTGRES_URL"}
    required_settings: ClassVar[frozenset[str]] = frozenset({"url"})

    def __init__(
        self, conninfo: str, statement_timeout_s: float = DEFAULT_STATEMENT_TIMEOUT_S
    ) -> None:
        """Connect to the server ``conninfo`` names (a ``postgresql://`` URL or ``key=value``
        pairs, as the config reads it from an environment variable); EngineError when it
        cannot, naming where (never the password)."""
        import psycopg  # where a query runs: importing the engines connects to nothing

        milliseconds = _timeout_ms(statement_timeout_s)
        self._begin = _BEGIN.format(milliseconds=milliseconds)
        self._conninfo = conninfo
        self.statement_timeout_s = statement_timeout_s
        self.where, self._password = _describe(conninfo)
        try:
            # no server-side prepared statements: psycopg prepares a query run five times,
            # and PostgreSQL's generic plan for a control's bound values ran 1.6x slower than
            # planning each run with them (bench/RESULTS.md, session 22)
            self.connection: psycopg.Connection[Any] = psycopg.connect(
                conninfo,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                prepare_threshold=None,
            )
            self.connection.execute(_SETTINGS, {"timeout": str(milliseconds)})
            with self._read_only() as connection:
                self.database: str = connection.execute(_DATABASE).fetchone()[0]  # type: ignore[index]
        except psycopg.Error as error:
            raise EngineError(
                f"cannot connect to PostgreSQL {self.where}: {self._reason(error)}"
            ) from None

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> PostgresEngine:
        """Connected to the server the ``url`` setting names (a URL or ``key=value`` pairs)."""
        return cls(settings["url"])

    def relation(
        self, target: Target, required: Sequence[str] = (), parameter: str = SNAPSHOT
    ) -> Relation:
        if not isinstance(target, TableTarget):
            raise SnapshotUnreadableError(f"the postgres engine does not read {target.shown}")
        parts = target.parts()
        if len(parts) == 3 and parts[0] != self.database:
            raise SnapshotUnreadableError(
                f"table {target.name[:200]!r} is in database {parts[0][:100]!r}, and this "
                f"connection is to {self.database!r}: connect to that database to read it"
            )
        types = self._column_types(target, parts)
        missing = [name for name in needed_columns(target, required) if name not in types]
        if missing:
            raise SchemaDriftError(target.shown[:300], missing, list(types))
        # PostgreSQL orders a NaN above every number and prunes by no statistics leaving it out
        whole = Relation(source=table_source(target, parts), types=types, filters_see_nans=True)
        return partition_of(whole, target, parameter)

    def _column_types(self, target: TableTarget, parts: list[str]) -> dict[str, str]:
        """The table's columns and their DuckDB type names; SnapshotNotFoundError without one."""
        rows = self._catalog(
            _COLUMNS,
            {
                "schema": parts[-2] if len(parts) > 1 else None,
                "table": parts[-1],
            },
        )
        if not rows:
            raise SnapshotNotFoundError(
                f"table not found: {target.name[:200]!r} in database {self.database!r}"
            )
        return {name: duckdb_type(native) for name, native in rows if name is not None}

    def _catalog(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            with self._read_only() as connection:
                return connection.execute(sql, params).fetchall()
        except psycopg.Error as error:
            raise SnapshotUnreadableError(self._reason(error)) from None

    def fetch(self, sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        import psycopg

        text, values = positional(sql, params)
        try:
            with self._read_only() as connection, psycopg.RawCursor(connection) as cursor:
                return cursor.execute(text, values).fetchall()
        except psycopg.Error as error:
            raise SnapshotUnreadableError(self._reason(error)) from None

    @contextmanager
    def _read_only(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection inside one statement's transaction (``_BEGIN``), rolled back on
        leaving, whatever the statement did, unless the connection is lost (its error is the
        one to report). Every statement the engine runs goes through here."""
        try:
            self.connection.execute(self._begin)
            yield self.connection
        finally:
            if not self.connection.broken:
                self.connection.execute("ROLLBACK")

    def worker(self) -> PostgresEngine:
        """A connection of its own: a server runs each connection's queries in parallel."""
        return PostgresEngine(self._conninfo, self.statement_timeout_s)

    def close(self) -> None:
        self.connection.close()

    def _reason(self, error: Exception) -> str:
        """The server's or driver's first line, the password cut out should it ever appear."""
        reason = first_line(error)
        return reason.replace(self._password, "***") if self._password else reason


def _timeout_ms(seconds: float) -> int:
    """A statement timeout in whole milliseconds, at least 1 (0 would turn it off); EngineError
    for one that is not a positive number of seconds PostgreSQL takes."""
    finite = isinstance(seconds, int | float) and 0 < seconds < math.inf
    milliseconds = math.ceil(seconds * 1000) if finite else 0
    if not 0 < milliseconds <= _MAX_TIMEOUT_MS:
        raise EngineError(
            "the PostgreSQL statement timeout must be a positive number of seconds up to "
            f"{_MAX_TIMEOUT_MS // 1000}, not {seconds!r:.50}"
        )
    return milliseconds


def _describe(conninfo: str) -> tuple[str, str | None]:
    """Where a connection string points (``user@host:port/database``, what errors may show)
    and its password (what they must never show); EngineError for a malformed one, without
    echoing it."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(conninfo)
    except Exception:  # psycopg's message quotes the string, password and all
        raise EngineError(
            "the PostgreSQL connection string is malformed (not shown: it may hold a password)"
        ) from None
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    database = f"/{parts['dbname']}" if parts.get("dbname") else ""
    where = f"{user}{parts.get('host') or 'localhost'}{port}{database}"
    password = parts.get("password")
    return where[:200], str(password) if password else None
