"""The spark engine as a Spark Connect client (``REFLEX_SPARK_REMOTE``) of a real Connect server
on loopback (the run's local driver serves one): controls on a file and on a table of the
server's catalog give what DuckDB gives on the same rows, and a server it cannot reach is a
quick clear error. A few cases only: the conformance suite runs every kind on the local
session, and Connect changes how queries travel, not what they compute."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_actions.controls import parse_control_spec
from reflex_actions.engines import open_engine
from reflex_actions.engines.base import EngineError, FileTarget, TableTarget
from reflex_actions.engines.spark import SparkEngine
from reflex_actions.errors import SnapshotUnreadableError
from reflex_actions.executor import run_control
from reflex_actions.testing.cases import rows_as
from tests.conformance.control_cases import ControlCase
from tests.conftest import write_snapshot
from tests.engines.engine_suite import CASES, BaseEngineConformance, _judged
from tests.engines.spark_session import (  # noqa: F401 - the run's session and server
    spark,
    spark_connect_url,
)
from tests.ports import free_port

#: The cases run over Connect: one aggregate over a key, one count over a column's values.
CONNECT_CASES = [case for case in CASES if case.type_name in {"uniqueness", "not_null"}]
#: Generous beside Connect's own ten minutes of retries; a refused connection takes ~1 s.
UNREACHABLE_WITHIN_S = 30
_VIEWS = itertools.count()


@pytest.fixture
def engine(spark_connect_url: str) -> Iterator[SparkEngine]:  # noqa: F811
    """An engine opened as an action opens it, from its settings (a Connect URL)."""
    opened = open_engine("spark", environ={"REFLEX_SPARK_REMOTE": spark_connect_url})
    assert isinstance(opened, SparkEngine)
    yield opened
    opened.close()


def test_a_connect_url_opens_a_connect_client_beside_a_local_session(
    engine: SparkEngine,
) -> None:
    """PySpark's general builder refuses a Connect client while a local session runs in the
    process (here the test run's own); the engine's client reaches the server."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(engine.session, ConnectSession)
    assert engine.fetch("SELECT current_timezone(), :n + 1", {"n": 41}) == [("UTC", 42)]


@pytest.mark.parametrize("read_as", ["file", "table"])
@pytest.mark.parametrize("rows_of", ["passing", "failing"])
@pytest.mark.parametrize("case", CONNECT_CASES, ids=[case.type_name for case in CONNECT_CASES])
def test_over_connect_gives_what_duckdb_gives_on_parquet(
    engine: SparkEngine, tmp_path: Path, case: ControlCase, rows_of: str, read_as: str
) -> None:
    rows = rows_as(case.passing_rows if rows_of == "passing" else case.failing_rows, case.columns)
    columns = list(rows[0])
    control = parse_control_spec(case.make_spec(case.columns))
    expected = BaseEngineConformance._on_parquet(control, case, tmp_path, rows, columns, None)
    path = write_snapshot(tmp_path / "connect.parquet", rows, columns)
    if read_as == "table":  # a view of the server's catalog, made through the client
        name = f"connect_{case.type_name}_{next(_VIEWS)}"
        engine.session.read.parquet(str(path)).createOrReplaceTempView(name)
        target: FileTarget | TableTarget = TableTarget(name)
    else:
        target = FileTarget(path)
    actual = run_control(control, target, engine=engine, as_of_ms=case.as_of_ms)
    assert _judged(actual) == _judged(expected)
    assert actual.passed is (rows_of == "passing")


def test_a_failed_query_is_one_error_without_pyspark_s_logged_copy(
    engine: SparkEngine, capfd: pytest.CaptureFixture[str]
) -> None:
    """PySpark logs each failed query's context as a JSON ERROR on stderr; the engine's error
    says it once (the table not found), and nothing is printed."""
    with pytest.raises(SnapshotUnreadableError, match="no_such_table"):
        engine.fetch("SELECT count(*) FROM no_such_table", {})
    printed = capfd.readouterr()
    assert "no_such_table" not in printed.err + printed.out


def test_an_unreachable_server_is_a_quick_error_naming_it_without_its_token() -> None:
    port = free_port()
    url = f"sc://127.0.0.1:{port}/;token=connect-secret;user_id=reflex"
    started = time.monotonic()
    with pytest.raises(EngineError) as raised:
        SparkEngine.from_config(remote=url)
    assert time.monotonic() - started < UNREACHABLE_WITHIN_S
    message = str(raised.value)
    assert message.startswith(f"cannot reach Spark Connect server sc://127.0.0.1:{port}:")
    assert message.endswith("Connection refused")  # gRPC's details, not the call's repr
    assert "connect-secret" not in message and "\n" not in message


def test_a_malformed_url_is_an_engine_error_without_its_token() -> None:
    with pytest.raises(EngineError, match=r"^'sc://127.0.0.1:port' is not a Spark Connect URL"):
        SparkEngine.from_config(remote="sc://127.0.0.1:port/;token=connect-secret")
    with pytest.raises(EngineError, match="should be provided as a key-value pair") as raised:
        SparkEngine.from_config(remote="sc://127.0.0.1:15002/;token;user_id=connect-secret")
    assert "connect-secret" not in str(raised.value)
