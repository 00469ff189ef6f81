"""The postgres engine on a real server (started once per run on loopback, see postgres_server)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import date
from typing import Any

import psycopg
import pytest

from reflex_actions.controls import parse_control_spec
from reflex_actions.engines import engine_class, open_engine
from reflex_actions.engines.base import EngineError, TableTarget
from reflex_actions.engines.postgres import PostgresEngine, duckdb_type, positional
from reflex_actions.errors import SnapshotNotFoundError, SnapshotUnreadableError
from reflex_actions.executor import run_control
from tests.engines.engine_suite import SECRET, BaseEngineConformance
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server

__all__ = ["postgres_server"]  # the session fixture, used by name below

UNIQUE_ID = parse_control_spec({"type": "uniqueness", "field": "transaction_id"})
NOT_NULL_ACCOUNT = parse_control_spec({"type": "not_null", "field": "account"})

#: A view whose column calls two functions on every row: one turns the session's read-only
#: default and statement timeout off (for every later statement, were they the session's
#: settings), the other writes whenever it can (a refused write swallowed, so the query goes on).
HOSTILE_VIEW = """
DROP SCHEMA IF EXISTS hostile CASCADE;
CREATE SCHEMA hostile;
CREATE TABLE hostile.victim (written text);
CREATE TABLE hostile.accounts (account text);
INSERT INTO hostile.accounts VALUES (NULL), ('a');
CREATE FUNCTION hostile.unlock(value text) RETURNS text VOLATILE LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('default_transaction_read_only', 'off', false);
    PERFORM set_config('statement_timeout', '0', false);
    RETURN value;
END $$;
CREATE FUNCTION hostile.write(value text) RETURNS text VOLATILE LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hostile.victim VALUES (coalesce(value, 'a NULL row'));
    RETURN value;
EXCEPTION WHEN read_only_sql_transaction THEN
    RETURN value;
END $$;
CREATE VIEW hostile.unlocking AS
    SELECT hostile.write(hostile.unlock(account)) AS account FROM hostile.accounts;
"""

#: two days of payments: day one repeats t1 twice more, day two repeats t2 once more
PAYMENTS = [
    {"transaction_id": "t1", "day": date(2026, 9, 1), "batch": 1},
    {"transaction_id": "t1", "day": date(2026, 9, 1), "batch": 1},
    {"transaction_id": "t1", "day": date(2026, 9, 1), "batch": 1},
    {"transaction_id": "t3", "day": date(2026, 9, 1), "batch": 1},
    {"transaction_id": "t2", "day": date(2026, 9, 2), "batch": 2},
    {"transaction_id": "t2", "day": date(2026, 9, 2), "batch": 2},
    {"transaction_id": "t4", "day": date(2026, 9, 2), "batch": 2},
]


@pytest.fixture
def engine(postgres_server: PostgresServer) -> Iterator[PostgresEngine]:
    engine = PostgresEngine(postgres_server.url())
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def payments(postgres_server: PostgresServer) -> str:
    create_table(postgres_server, ("finance", "payments"), PAYMENTS)
    return "finance.payments"


def test_the_registry_opens_it_from_the_url_variable_never_showing_its_value(
    postgres_server: PostgresServer,
) -> None:
    assert engine_class("postgres") is PostgresEngine
    opened = open_engine("postgres", environ={"REFLEX_POSTGRES_URL": postgres_server.url()})
    try:
        assert isinstance(opened, PostgresEngine) and opened.database == postgres_server.database
    finally:
        opened.close()
    with pytest.raises(EngineError, match="set the environment variable REFLEX_POSTGRES_URL"):
        open_engine("postgres", environ={})
    wrong = postgres_server.url(password="wrong-secret-value")
    with pytest.raises(EngineError) as refused:
        open_engine("postgres", {"url": "WAREHOUSE_URL"}, environ={"WAREHOUSE_URL": wrong})
    assert "wrong-secret-value" not in str(refused.value)


def test_judges_a_table_and_each_partition_of_it(engine: PostgresEngine, payments: str) -> None:
    whole = run_control(UNIQUE_ID, TableTarget(payments), engine=engine)
    assert (whole.passed, whole.rows_scanned, whole.violation_count) == (False, 7, 3)
    assert whole.sample[0] == {"key": {"transaction_id": "t1"}, "occurrences": 3}
    assert whole.snapshot == payments and whole.snapshot_id == "live"
    # a date partition and an integer one, each given as text as an operation names it
    day_two = run_control(UNIQUE_ID, TableTarget(payments, "day", "2026-09-02"), engine=engine)
    assert (day_two.rows_scanned, day_two.violation_count, day_two.snapshot_id) == (
        3,
        1,
        "2026-09-02",
    )
    assert day_two.sample == [{"key": {"transaction_id": "t2"}, "occurrences": 2}]
    batch_one = run_control(UNIQUE_ID, TableTarget(payments, "batch", "1"), engine=engine)
    assert (batch_one.rows_scanned, batch_one.violation_count) == (4, 2)
    # a parent's partition is bound under its own name, beside the child's
    parent = engine.relation(TableTarget(payments, "day", "2026-09-01"), parameter="reference")
    assert parent.params == {"reference_partition": "2026-09-01"}


def test_one_two_and_three_part_names_read_the_same_table(
    engine: PostgresEngine, postgres_server: PostgresServer
) -> None:
    create_table(postgres_server, ("public", "plain_orders"), PAYMENTS[:3])
    for name in (
        "plain_orders",
        "public.plain_orders",
        f"{postgres_server.database}.public.plain_orders",
    ):
        assert run_control(UNIQUE_ID, TableTarget(name), engine=engine).violation_count == 2, name
    with pytest.raises(SnapshotUnreadableError, match=r"is in database 'warehouse'.*connect to"):
        engine.relation(TableTarget("warehouse.public.plain_orders"))


def test_column_types_are_given_in_duckdb_names(
    engine: PostgresEngine, postgres_server: PostgresServer
) -> None:
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(
            "DROP TABLE IF EXISTS typed; CREATE TABLE typed (a integer, b bigint, c text, "
            "d varchar(64), e numeric(10,2), f double precision, g real, h boolean, i date, "
            "j timestamp, k timestamptz, l numeric, m integer[], n character(3))"
        )
    types = engine.relation(TableTarget("public.typed")).types
    assert dict(types) == {
        "a": "INTEGER", "b": "BIGINT", "c": "VARCHAR", "d": "VARCHAR", "e": "DECIMAL(10,2)",
        "f": "DOUBLE", "g": "FLOAT", "h": "BOOLEAN", "i": "DATE", "j": "TIMESTAMP",
        "k": "TIMESTAMP WITH TIME ZONE", "l": "DECIMAL", "m": "INTEGER[]", "n": "VARCHAR",
    }  # fmt: skip
    assert duckdb_type("mood") == "MOOD"  # a user-defined type keeps its name


def test_a_missing_schema_and_a_partition_value_of_the_wrong_type_are_clear_errors(
    engine: PostgresEngine, payments: str, postgres_server: PostgresServer
) -> None:
    """(A missing table and a missing column: the engine conformance suite.)"""
    with pytest.raises(SnapshotNotFoundError, match="table not found"):
        run_control(UNIQUE_ID, TableTarget("no_such_schema.payments"), engine=engine)
    with pytest.raises(SnapshotUnreadableError, match="invalid input syntax for type date") as bad:
        run_control(UNIQUE_ID, TableTarget(payments, "day", "yesterday'--"), engine=engine)
    assert postgres_server.password not in str(bad.value)


def test_an_unreachable_server_is_named_and_a_wrong_password_is_never_shown(
    postgres_server: PostgresServer,
) -> None:
    """(That no credential shows: the engine conformance suite.)"""
    closed = PostgresServer(**{**postgres_server.__dict__, "port": _closed_port()})
    with pytest.raises(EngineError) as unreachable:
        PostgresEngine(closed.url())
    message = str(unreachable.value)
    assert f"reflex@127.0.0.1:{closed.port}/reflex" in message and "refused" in message
    wrong = "not-the-password-" + postgres_server.password[:6]
    with pytest.raises(EngineError, match="password authentication failed") as refused:
        PostgresEngine(postgres_server.url(password=wrong))
    assert wrong not in str(refused.value)
    with pytest.raises(EngineError, match="malformed") as malformed:
        PostgresEngine(f"host=127.0.0.1 password={postgres_server.password} port")
    assert postgres_server.password not in str(malformed.value)


def test_hostile_table_and_column_names_are_quoted(
    engine: PostgresEngine, postgres_server: PostgresServer
) -> None:
    schema, table, key = (
        'we"ird; DROP SCHEMA public --',
        "x'); DELETE FROM y; --",
        'k%(snapshot)s "%',
    )
    rows = [{key: "a"}, {key: "a"}, {key: "b"}]
    create_table(postgres_server, (schema, table), rows)
    create_table(postgres_server, ("public", "y"), [{"kept": 1}])
    control = parse_control_spec({"type": "uniqueness", "field": key})
    result = run_control(control, TableTarget(f"{schema}.{table}", key, "a"), engine=engine)
    assert (result.rows_scanned, result.violation_count) == (2, 1)
    assert result.sample == [{"key": {key: "a"}, "occurrences": 2}]
    assert engine.fetch("SELECT count(*) FROM public.y", {}) == [(1,)]


def test_markers_in_quotes_and_modulo_are_left_as_written() -> None:
    text, values = positional(
        "SELECT \"a%(x)s\", '%(x)s', 7 % 2 FROM t WHERE c = %(x)s OR d = %(y)s OR e = %(x)s",
        {"x": 1, "y": 2, "unused": 3},
    )
    assert text == "SELECT \"a%(x)s\", '%(x)s', 7 % 2 FROM t WHERE c = $1 OR d = $2 OR e = $1"
    assert values == [1, 2]


def test_the_connection_is_read_only_with_a_statement_timeout(
    postgres_server: PostgresServer, payments: str
) -> None:
    engine = PostgresEngine(postgres_server.url(), statement_timeout_s=0.2)
    try:
        with pytest.raises(SnapshotUnreadableError, match="read-only transaction"):
            engine.fetch("DELETE FROM finance.payments", {})
        with pytest.raises(SnapshotUnreadableError, match="statement timeout"):
            engine.fetch("SELECT pg_sleep(5)", {})
        assert engine.fetch("SELECT count(*) FROM finance.payments", {}) == [(len(PAYMENTS),)]
    finally:
        engine.close()


@pytest.fixture
def hostile_view(postgres_server: PostgresServer) -> str:
    """``hostile.unlocking`` (HOSTILE_VIEW), created afresh by the server's owner."""
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(HOSTILE_VIEW)
    return "hostile.unlocking"


def test_a_view_turning_read_only_off_in_the_counts_cannot_write_in_the_sample(
    postgres_server: PostgresServer, hostile_view: str
) -> None:
    """Each statement is a read-only transaction of its own, rolled back: what the counts
    query's function turned off is back on for the sample query, and for any after it."""
    engine = PostgresEngine(postgres_server.url(), statement_timeout_s=0.5)
    try:
        result = run_control(NOT_NULL_ACCOUNT, TableTarget(hostile_view), engine=engine)
        assert (result.passed, result.violation_count, len(result.sample)) == (False, 1, 1)
        settings = (
            "SELECT current_setting('transaction_read_only'), current_setting('statement_timeout')"
        )
        assert engine.fetch(settings, {}) == [("on", "500ms")]
        with pytest.raises(SnapshotUnreadableError, match="read-only transaction"):
            engine.fetch("INSERT INTO hostile.victim VALUES ('direct') RETURNING written", {})
    finally:
        engine.close()
    with psycopg.connect(postgres_server.url()) as admin:
        assert admin.execute("SELECT written FROM hostile.victim").fetchall() == []


def test_a_view_turning_the_timeout_off_leaves_the_next_statement_timed(
    postgres_server: PostgresServer, hostile_view: str
) -> None:
    engine = PostgresEngine(postgres_server.url(), statement_timeout_s=0.5)
    try:
        run_control(NOT_NULL_ACCOUNT, TableTarget(hostile_view), engine=engine)
        started = time.perf_counter()
        with pytest.raises(SnapshotUnreadableError, match="statement timeout"):
            engine.fetch("SELECT pg_sleep(3)", {})
        assert time.perf_counter() - started < 2.5
    finally:
        engine.close()


@pytest.mark.parametrize("seconds", [0, -1, 0.0, float("nan"), float("inf"), 3e6])
def test_a_statement_timeout_that_is_off_or_out_of_range_is_refused(seconds: float) -> None:
    """Refused before connecting: 0 would turn the timeout off, 3e6 s is past PostgreSQL's."""
    with pytest.raises(EngineError, match="statement timeout must be a positive number"):
        PostgresEngine(f"postgresql://reflex@127.0.0.1:{_closed_port()}/reflex", seconds)


def test_times_are_read_in_utc_whatever_the_session_zone(postgres_server: PostgresServer) -> None:
    """A naive time is UTC to every engine: a freshness age must not move with the zone a
    connection string or the server sets."""
    new_york = postgres_server.url() + "?options=-c%20TimeZone%3DAmerica/New_York"
    engine = PostgresEngine(new_york)
    try:
        shifted = "SELECT CAST(TIMESTAMPTZ '2026-03-01 12:00:00+00' AS TIMESTAMP)::text"
        assert engine.fetch(shifted, {}) == [("2026-03-01 12:00:00",)]
    finally:
        engine.close()


def test_a_worker_has_its_own_connection(engine: PostgresEngine) -> None:
    worker = engine.worker()
    try:
        backend = "SELECT pg_backend_pid()"
        assert worker.fetch(backend, {}) != engine.fetch(backend, {})
        assert worker.fetch("SHOW default_transaction_read_only", {}) == [("on",)]
    finally:
        worker.close()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TestPostgresConformance(BaseEngineConformance):
    """Every control case on PostgreSQL tables gives what DuckDB gives on Parquet files."""

    @pytest.fixture(autouse=True)
    def _server(self, postgres_server: PostgresServer) -> None:
        self.server = postgres_server

    @pytest.fixture
    def engine(self, postgres_server: PostgresServer) -> Iterator[PostgresEngine]:
        engine = PostgresEngine(postgres_server.url())
        yield engine
        engine.close()

    def load_table(self, name: str, rows: list[dict[str, Any]], columns: list[str]) -> TableTarget:
        create_table(self.server, ("conformance", name), rows, columns)
        return TableTarget(f"conformance.{name}")

    def missing_table(self) -> TableTarget:
        return TableTarget("conformance.absent")

    def unreachable_engine(self) -> None:
        closed = PostgresServer(
            **{**self.server.__dict__, "port": _closed_port(), "password": SECRET}
        )
        PostgresEngine(closed.url())


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "not_null", "field": "transaction_id"},
        {"type": "accepted_values", "field": "transaction_id", "values": ["t1", "t2"]},
    ],
    ids=["not_null", "accepted_values"],
)
def test_a_row_control_counts_with_filter_and_an_empty_partition_counts_zero(
    engine: PostgresEngine, payments: str, spec: dict[str, Any]
) -> None:
    """PostgreSQL counts a row control's violations with ``COUNT(*) FILTER (WHERE ...)``;
    no rows at all are 0 violations (a SUM of a CASE would be NULL)."""
    control = parse_control_spec(spec)
    seen: list[str] = []
    fetch = engine.fetch

    def recording(sql: str, params: Any) -> list[tuple[Any, ...]]:
        seen.append(sql)
        return fetch(sql, params)

    engine.fetch = recording  # type: ignore[method-assign]
    empty = run_control(control, TableTarget(payments, "day", "2026-01-01"), engine=engine)
    assert (empty.passed, empty.rows_scanned, empty.violation_count) == (True, 0, 0)
    assert "COUNT(*) FILTER(WHERE" in seen[0]
    whole = run_control(control, TableTarget(payments), engine=engine)
    assert whole.rows_scanned == 7
    assert whole.violation_count == (0 if spec["type"] == "not_null" else 2)  # t3, t4


def test_a_control_run_again_and_again_is_planned_with_its_values_each_time(
    engine: PostgresEngine, payments: str
) -> None:
    """psycopg prepares a query run five times, and PostgreSQL's generic plan for a control's
    bound values ran 1.6x slower (a backtest or an action runs one control's SQL many times):
    the engine's connection prepares nothing."""
    control = parse_control_spec(
        {"type": "accepted_values", "field": "transaction_id", "values": ["t1"]}
    )
    for _ in range(8):
        assert run_control(control, TableTarget(payments), engine=engine).violation_count == 4
    prepared = engine.connection.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
    assert prepared == (0,)
