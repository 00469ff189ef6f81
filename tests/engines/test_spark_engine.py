"""The spark engine on a real local session: tables of its catalog, one partition of a table,
and Parquet/CSV files give the counts and the sample DuckDB gives on the same rows."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

from reflex_actions.backtest import backtest
from reflex_actions.backtest.history import partition_history
from reflex_actions.controls import parse_control_spec
from reflex_actions.engines import engine_class, open_engine
from reflex_actions.engines.base import EngineError, FileTarget, TableTarget
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.engines.spark import MAX_REASON, SparkEngine, session_builder
from reflex_actions.errors import SchemaDriftError, SnapshotNotFoundError, SnapshotUnreadableError
from reflex_actions.executor import ControlResult, run_control
from reflex_actions.snapshots import SnapshotFile
from tests.conformance.control_cases import HOSTILE_NAMES, UNIQUENESS
from tests.conftest import write_snapshot
from tests.engines.engine_suite import SECRET, BaseEngineConformance
from tests.engines.spark_session import spark  # noqa: F401 - the one session of the run
from tests.ports import free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DATABASE = "reflex_test"
_TABLES = itertools.count()


@pytest.fixture
def engine(spark: SparkSession) -> SparkEngine:  # noqa: F811 - the fixture imported above
    return SparkEngine(spark)


def rows_of(names: dict[str, str]) -> list[dict[str, Any]]:
    return [{names[role]: value for role, value in row.items()} for row in UNIQUENESS.failing_rows]


def table_of(spark: SparkSession, path: Path) -> str:  # noqa: F811
    """A new table of the session's catalog holding the rows of the Parquet file at ``path``."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    name = f"{DATABASE}.payments_{next(_TABLES)}"
    spark.read.parquet(str(path)).write.saveAsTable(name)
    return name


def judged(result: ControlResult) -> dict[str, Any]:
    """What a result says of the rows (not where they were read or how long it took)."""
    return result.model_dump(exclude={"snapshot", "snapshot_id", "elapsed_ms"})


def uniqueness(names: dict[str, str]) -> Any:
    return parse_control_spec(UNIQUENESS.make_spec(names))


HOSTILE = {"key": HOSTILE_NAMES[0], "amount": HOSTILE_NAMES[3]}


def test_it_is_the_registered_spark_engine() -> None:
    assert engine_class("spark") is SparkEngine
    assert (SparkEngine.name, SparkEngine.dialect) == ("spark", "spark")
    assert SparkEngine.targets == (TableTarget, FileTarget)


@pytest.mark.parametrize("names", [UNIQUENESS.columns, HOSTILE], ids=["plain", "hostile"])
def test_uniqueness_on_a_table_is_what_duckdb_finds_in_the_file(
    tmp_path: Path,
    spark: SparkSession,  # noqa: F811
    engine: SparkEngine,
    names: dict[str, str],
) -> None:
    path = write_snapshot(tmp_path / "payments.parquet", rows_of(names))
    on_duckdb = run_control(uniqueness(names), path)
    on_spark = run_control(uniqueness(names), TableTarget(table_of(spark, path)), engine=engine)
    assert not on_spark.passed and on_spark.violation_count == UNIQUENESS.expected_violations
    assert on_spark.sample[0] == {"key": {names["key"]: "t1"}, "occurrences": 3}
    assert judged(on_spark) == judged(on_duckdb)
    assert on_spark.snapshot_id == "live"


def test_a_three_part_name_reads_the_catalog_s_table(
    tmp_path: Path,
    spark: SparkSession,  # noqa: F811
    engine: SparkEngine,
) -> None:
    path = write_snapshot(tmp_path / "payments.parquet", rows_of(UNIQUENESS.columns))
    name = f"spark_catalog.{table_of(spark, path)}"
    result = run_control(uniqueness(UNIQUENESS.columns), TableTarget(name), engine=engine)
    assert (result.rows_scanned, result.violation_count) == (8, 3)


@pytest.mark.parametrize("read_as", ["table", "file"])
def test_uniqueness_on_a_partition_judges_only_its_rows(
    tmp_path: Path,
    spark: SparkSession,  # noqa: F811
    engine: SparkEngine,
    read_as: str,
) -> None:
    day_one = [{**row, "day": "2026-11-30"} for row in rows_of(UNIQUENESS.columns)]
    day_two = [{"transaction_id": "t9", "amount": 9, "day": "2026-12-01"}] * 2
    path = write_snapshot(tmp_path / "all.parquet", day_one + day_two)
    table = table_of(spark, path) if read_as == "table" else None
    control = uniqueness(UNIQUENESS.columns)
    for day, rows in (("2026-11-30", day_one), ("2026-12-01", day_two)):
        target = TableTarget(table, "day", day) if table else FileTarget(path, "day", day)
        on_spark = run_control(control, target, engine=engine)
        on_duckdb = run_control(control, write_snapshot(tmp_path / f"{day}.parquet", rows))
        assert judged(on_spark) == judged(on_duckdb)
        assert (on_spark.rows_scanned, on_spark.snapshot_id) == (len(rows), day)
    assert on_spark.sample == [{"key": {"transaction_id": "t9"}, "occurrences": 2}]


def test_a_backtest_on_a_table_s_partitions_is_what_duckdb_finds_in_the_file(
    tmp_path: Path,
    spark: SparkSession,  # noqa: F811
    engine: SparkEngine,
) -> None:
    """Spark's history points are a partition column's values, each judged on its own."""
    rows = [
        {**row, "day": dt.date(2026, 11, 28 + i % 3)}
        for i, row in enumerate(rows_of(UNIQUENESS.columns) * 2)
    ]
    path = write_snapshot(tmp_path / "all.parquet", rows)
    on_spark = partition_history(engine, TableTarget(table_of(spark, path)), "day")
    duckdb_engine = DuckDBEngine()
    on_duckdb = partition_history(duckdb_engine, FileTarget(path), "day")
    assert [p.snapshot_id for p in on_spark.points] == ["2026-11-28", "2026-11-29", "2026-11-30"]
    assert [p.snapshot_id for p in on_spark.points] == [p.snapshot_id for p in on_duckdb.points]
    control = uniqueness(UNIQUENESS.columns)
    outcomes = [
        [
            (o.snapshot_id, o.rows_scanned, o.violation_count, o.sample)
            for o in backtest(control, [history], engine=engine_used, workers=2).per_snapshot
        ]
        for history, engine_used in ((on_spark, engine), (on_duckdb, duckdb_engine))
    ]
    duckdb_engine.close()
    assert outcomes[0] == outcomes[1]
    assert sum(violations for _, _, violations, _ in outcomes[0]) > 0


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize("names", [UNIQUENESS.columns, HOSTILE], ids=["plain", "hostile"])
def test_uniqueness_on_a_file_is_what_duckdb_finds(
    tmp_path: Path, engine: SparkEngine, suffix: str, names: dict[str, str]
) -> None:
    path = write_snapshot(tmp_path / f"payments.{suffix}", rows_of(names))
    on_spark = run_control(uniqueness(names), FileTarget(path), engine=engine)
    assert judged(on_spark) == judged(run_control(uniqueness(names), path))
    assert on_spark.violation_count == UNIQUENESS.expected_violations
    assert on_spark.snapshot_id == "payments"


def test_a_file_is_read_as_named_never_as_a_pattern(tmp_path: Path, engine: SparkEngine) -> None:
    """``a[1]*.parquet`` as a Hadoop pattern would match ``a1x.parquet``, its neighbour."""
    named = write_snapshot(tmp_path / "k=1" / "a[1]*.parquet", [{"transaction_id": "t1"}] * 2)
    write_snapshot(tmp_path / "k=1" / "a1x.parquet", [{"transaction_id": "t1"}] * 5)
    relation = engine.relation(FileTarget(named), ["transaction_id"])
    assert relation.types == {"transaction_id": "VARCHAR"}  # no partition column `k`
    result = run_control(uniqueness(UNIQUENESS.columns), FileTarget(named), engine=engine)
    assert (result.rows_scanned, result.violation_count) == (2, 1)


def test_column_types_are_duckdb_s_names_for_the_same_file(
    tmp_path: Path, engine: SparkEngine
) -> None:
    at = dt.datetime(2026, 12, 1, 10, 30)
    columns = {
        "text": pa.array(["a"]),
        "small": pa.array([1], pa.int32()),
        "big": pa.array([1], pa.int64()),
        "real": pa.array([1.5], pa.float64()),
        "money": pa.array([Decimal("1.50")], pa.decimal128(10, 2)),
        "flag": pa.array([True]),
        "day": pa.array([at.date()]),
        "local_time": pa.array([at], pa.timestamp("us")),
        "instant": pa.array([at], pa.timestamp("us", tz="UTC")),
        "tags": pa.array([[1, 2]], pa.list_(pa.int32())),
    }
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table(columns), path)
    expected = SnapshotFile.from_path(path).column_types(duckdb.connect())
    assert engine.relation(FileTarget(path)).types == expected
    assert expected["text"] == "VARCHAR" and expected["instant"] == "TIMESTAMP WITH TIME ZONE"


def test_a_csv_file_is_text_with_its_header(tmp_path: Path, engine: SparkEngine) -> None:
    path = tmp_path / "quoted.csv"
    path.write_text('id,note\n1,"say ""hi""\nthere"\n2,\n', encoding="utf-8")
    relation = engine.relation(FileTarget(path), ["id", "note"])
    assert (relation.types, relation.text_only) == ({"id": "VARCHAR", "note": "VARCHAR"}, True)
    rows = engine.fetch(relation.source.order_by("id").sql(dialect=engine.dialect), {})
    assert rows == [("1", 'say "hi"\nthere'), ("2", None)]


def test_a_missing_column_of_a_file_is_schema_drift_naming_it(
    tmp_path: Path, engine: SparkEngine
) -> None:
    """(Of a table: the engine conformance suite.)"""
    path = write_snapshot(tmp_path / "payments.parquet", rows_of(UNIQUENESS.columns))
    with pytest.raises(SchemaDriftError, match="'payment_id'"):
        engine.relation(FileTarget(path), ["payment_id"])


def test_missing_and_unreadable_files_are_clear_errors(tmp_path: Path, engine: SparkEngine) -> None:
    with pytest.raises(SnapshotNotFoundError, match="not found"):
        engine.relation(FileTarget(tmp_path / "absent.parquet"))
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(SnapshotUnreadableError, match=r"corrupt\.parquet") as raised:
        engine.relation(FileTarget(corrupt))
    assert "An error occurred while calling" not in str(raised.value)


def test_a_failing_query_is_unreadable_with_spark_s_first_line_bounded(
    engine: SparkEngine,
) -> None:
    long_name = "x" * 5_000
    with pytest.raises(SnapshotUnreadableError) as raised:
        engine.fetch(f"SELECT `{long_name}` FROM range(1)", {})
    message = str(raised.value)
    assert "UNRESOLVED_COLUMN" in message and "\n" not in message
    assert len(message) <= MAX_REASON


def test_bound_lists_may_hold_a_null_or_mixed_numbers(engine: SparkEngine) -> None:
    """Spark's own list binding refuses both; a marker's text inside a quoted name or a
    string is not a marker."""
    sql = (
        "SELECT :n + 1, array_contains(:values, 'b'), size(:values), size(:none),"
        " array_contains(:mixed, 2.5), ':values' AS `:values`"
    )
    params = {"n": 41, "values": ["a", None, "b"], "none": [], "mixed": [1, 2.5]}
    assert engine.fetch(sql, params) == [(42, True, 3, 0, True, ":values")]


def test_a_session_is_configured_not_hard_wired() -> None:
    local = session_builder(warehouse="/tmp/reflex-warehouse")._options
    assert local["spark.master"] == "local[2]"
    assert local["spark.driver.bindAddress"] == local["spark.driver.host"] == "127.0.0.1"
    assert local["spark.ui.enabled"] == local["spark.ui.showConsoleProgress"] == "false"
    assert local["spark.sql.warehouse.dir"] == str(Path("/tmp/reflex-warehouse").resolve())
    cluster = session_builder(master="spark://10.0.0.5:7077")._options
    assert cluster["spark.master"] == "spark://10.0.0.5:7077"
    assert "spark.driver.bindAddress" not in cluster
    assert local["spark.sql.session.timeZone"] == cluster["spark.sql.session.timeZone"] == "UTC"
    assert session_builder(remote="sc://spark.internal:15002")._options["spark.remote"] == (
        "sc://spark.internal:15002"
    )


def test_a_local_session_serves_no_web_ui_and_draws_no_progress_bar(
    spark: SparkSession,  # noqa: F811 - the fixture imported above
) -> None:
    """The run's session was started by ``session_builder``: no port 4040 open, nothing drawn
    over the CLI's or the action's output."""
    assert spark.sparkContext.uiWebUrl is None
    assert spark.conf.get("spark.ui.showConsoleProgress") == "false"


def test_a_bad_connection_setting_is_a_clear_error() -> None:
    with pytest.raises(EngineError, match="does not start with sc://"):
        session_builder(remote="http://spark.internal:15002")
    with pytest.raises(EngineError, match="either the URL or a master"):
        session_builder(remote="sc://spark.internal:15002", warehouse="/tmp/w")
    with pytest.raises(EngineError, match="no setting 'password'"):
        open_engine("spark", {"password": "REFLEX_SPARK_PASSWORD"}, environ={})


def test_opened_from_settings_it_shares_the_running_session_and_leaves_it_running(
    spark: SparkSession,  # noqa: F811
) -> None:
    opened = open_engine("spark", environ={"REFLEX_SPARK_MASTER": "local[2]"})
    assert isinstance(opened, SparkEngine) and opened.session is spark
    opened.close()
    assert spark.sql("SELECT 1").collect()[0][0] == 1


def test_a_worker_shares_the_session_and_closing_it_stops_nothing(
    tmp_path: Path,
    spark: SparkSession,  # noqa: F811
) -> None:
    owner = SparkEngine(spark, owned=True)  # as if it had started the session
    worker = owner.worker()
    path = write_snapshot(tmp_path / "payments.parquet", rows_of(UNIQUENESS.columns))
    result = run_control(uniqueness(UNIQUENESS.columns), FileTarget(path), engine=worker)
    worker.close()
    assert (worker.session, result.violation_count) == (spark, 3)
    assert spark.sql("SELECT 1").collect() == [(1,)]


def test_close_drops_the_views_of_the_files_it_read(
    tmp_path: Path,
    spark: SparkSession,  # noqa: F811
) -> None:
    engine = SparkEngine(spark)
    path = write_snapshot(tmp_path / "payments.parquet", rows_of(UNIQUENESS.columns))
    table = engine.relation(FileTarget(path)).source.find(exp.Table)
    assert table is not None
    view = table.name
    assert spark.catalog.tableExists(view)
    engine.close()
    assert not spark.catalog.tableExists(view)


class TestSparkConformance(BaseEngineConformance):
    """Every kind's control case on views of the session's catalog over the same Parquet rows
    DuckDB judges (a view, not a saved table: one costs a file write, and the suite loads
    dozens)."""

    @pytest.fixture(autouse=True)
    def _session(self, spark: SparkSession, tmp_path: Path) -> None:  # noqa: F811
        self.session, self.folder = spark, tmp_path

    @pytest.fixture
    def engine(self, spark: SparkSession) -> Iterator[SparkEngine]:  # noqa: F811
        engine = SparkEngine(spark)
        yield engine
        engine.close()

    def load_table(self, name: str, rows: list[dict[str, Any]], columns: list[str]) -> TableTarget:
        path = write_snapshot(self.folder / f"table-{next(_TABLES)}.parquet", rows, columns)
        self.session.read.parquet(str(path)).createOrReplaceTempView(f"`{_escaped(name)}`")
        return TableTarget(name)

    def unreachable_engine(self) -> None:
        SparkEngine.from_config(remote=f"sc://127.0.0.1:{free_port()}/;token={SECRET}")


def _escaped(name: str) -> str:
    return name.replace("`", "``")
