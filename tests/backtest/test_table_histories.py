"""Histories beyond folders (DESIGN §8), each with exact backtest metrics: a partition column
of a table (one evaluation per partition), an Iceberg table's snapshots, a Delta table's
versions; labelled by a labels.yaml-format file whose ids are those points."""

from __future__ import annotations

import json
import threading
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reflex_actions.backtest import BacktestReport, backtest
from reflex_actions.backtest import engine as backtest_engine
from reflex_actions.backtest.history import (
    History,
    HistoryError,
    HistoryPoint,
    delta_history,
    iceberg_history,
    partition_history,
)
from reflex_actions.cli.main import cli
from reflex_actions.controls import parse_control_spec
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.engines.base import Engine, FileTarget, TableTarget, Target
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.engines.postgres import PostgresEngine
from reflex_actions.errors import ReflexError, SchemaDriftError
from tests.conftest import write_snapshot
from tests.engines import lakehouse_tables
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server

__all__ = ["postgres_server"]  # the session fixture, used by name below

TXN = UniquenessControl(field="transaction_id")


def labels(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "labels.yaml"
    path.write_text(text)
    return path


def verdicts(report: BacktestReport) -> dict[str, str]:
    return {outcome.snapshot_id: outcome.verdict for outcome in report.per_snapshot}


def test_iceberg_snapshots_are_backtested_one_evaluation_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = lakehouse_tables.iceberg_history(tmp_path, monkeypatch)
    labelled = labels(
        tmp_path,
        f"failures:\n  - {table.duplicated}\n"
        f"  - {{snapshot: {table.repaired}, incident: 'urn:li:incident:7'}}\n",
    )
    history = iceberg_history(table.catalog, table.table, labels=labelled)
    report = backtest(TXN, [history], workers=2)
    assert verdicts(report) == {
        str(table.clean): "true_negative",
        str(table.duplicated): "true_positive",
        str(table.repaired): "false_negative",  # labelled, but the duplicate was deleted
        str(table.duplicated_again): "false_positive",
    }
    assert (report.precision, report.recall) == (0.5, 0.5)
    assert [o.rows_scanned for o in report.per_snapshot] == [4, 5, 4, 6]
    assert report.datasets[0].dataset == "finance.payments"
    assert report.datasets[0].history == "iceberg:reflex/finance.payments"
    assert report.per_snapshot[1].path == f"iceberg:reflex/finance.payments@{table.duplicated}"


def test_delta_versions_are_backtested_and_a_drifted_one_is_not_evaluable(tmp_path: Path) -> None:
    path = lakehouse_tables.delta_history(tmp_path)
    history = delta_history(path, labels=labels(tmp_path, "failures: [1, 2, 4]\n"))
    report = backtest(TXN, [history], workers=2)
    assert verdicts(report) == {
        "0": "true_negative",
        "1": "true_positive",
        "2": "false_negative",
        "3": "false_positive",
        "4": "not_evaluable",
    }
    assert (report.precision, report.recall) == (0.5, 0.5)
    assert "schema drift" in report.per_snapshot[4].reason
    assert report.coverage.visible_labelled_failures == 2


def test_a_volume_control_judges_each_version_against_the_counts_before_it(
    tmp_path: Path,
) -> None:
    history = delta_history(lakehouse_tables.delta_history(tmp_path))
    volume = parse_control_spec({"type": "volume", "max_drop": 0.5})
    report = backtest(volume, [history], workers=2)
    judged = [(o.snapshot_id, o.rows_scanned, o.flagged) for o in report.per_snapshot]
    # version 4 (its key renamed: a volume control needs no column) keeps 1 row of 3
    assert judged == [
        ("0", 3, False),
        ("1", 3, False),
        ("2", 4, False),
        ("3", 3, False),
        ("4", 1, True),
    ]


def partitioned_file(tmp_path: Path) -> Path:
    """One Parquet file holding four daily loads (and a row with no load date)."""
    days = {
        "2026-09-01": ["t0", "t1"],
        "2026-09-02": ["t0", "t1", "t1"],  # a duplicate: labelled
        "2026-09-03": ["t0", "t1", "t2"],  # labelled, but clean
        "2026-09-04": ["t5", "t5"],  # a duplicate, not labelled
    }
    rows = [(day, txn) for day, ids in days.items() for txn in ids] + [(None, "t5")]
    table = pa.table(
        {
            "load_date": pa.array(
                [day and date.fromisoformat(day) for day, _ in rows], pa.date32()
            ),
            "transaction_id": [txn for _, txn in rows],
        }
    )
    path = tmp_path / "payments.parquet"
    pq.write_table(table, path)
    return path


def backtest_partitions(engine: Engine, target: Target, tmp_path: Path) -> BacktestReport:
    """The partitions of ``target``'s load_date backtested on ``engine`` (closed after), with
    2026-09-02 and 2026-09-03 labelled failures; its verdicts are checked to be exact."""
    try:
        history = partition_history(
            engine,
            target,
            "load_date",
            labels=labels(tmp_path, "failures: [2026-09-02, 2026-09-03]\n"),
        )
        report = backtest(TXN, [history], engine=engine, workers=2)
    finally:
        engine.close()
    assert verdicts(report) == {
        "2026-09-01": "true_negative",
        "2026-09-02": "true_positive",
        "2026-09-03": "false_negative",
        "2026-09-04": "false_positive",
    }
    return report


def test_a_partition_column_is_a_history_one_evaluation_per_partition(tmp_path: Path) -> None:
    path = partitioned_file(tmp_path)
    report = backtest_partitions(DuckDBEngine(), FileTarget(path), tmp_path)
    assert (report.precision, report.recall) == (0.5, 0.5)
    assert [o.rows_scanned for o in report.per_snapshot] == [2, 3, 3, 2]  # the NULL row: none
    assert report.per_snapshot[1].sample == [{"key": {"transaction_id": "t1"}, "occurrences": 2}]
    assert report.datasets[0].history == f"{path} partitioned by load_date"


def test_a_partition_column_the_table_lacks_is_schema_drift(tmp_path: Path) -> None:
    engine = DuckDBEngine()
    try:
        with pytest.raises(SchemaDriftError, match=r"missing column\(s\) 'day'"):
            partition_history(engine, FileTarget(partitioned_file(tmp_path)), "day")
    finally:
        engine.close()


def test_a_partition_column_with_too_many_values_is_no_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reflex_actions.backtest import history as history_module

    monkeypatch.setattr(history_module, "MAX_HISTORY_POINTS", 3)
    engine = DuckDBEngine()
    try:
        with pytest.raises(HistoryError, match="more than 3 history points"):
            partition_history(engine, FileTarget(partitioned_file(tmp_path)), "load_date")
    finally:
        engine.close()


def test_an_engine_that_cannot_read_the_points_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = lakehouse_tables.iceberg_history(tmp_path, monkeypatch)
    history = iceberg_history(table.catalog, table.table)

    class FilesOnly(DuckDBEngine):
        targets = (FileTarget,)

    engine = FilesOnly()
    try:
        with pytest.raises(ReflexError, match=r"does not read the history of finance\.payments"):
            backtest(TXN, [history], engine=engine)
    finally:
        engine.close()


def shape(payload: object) -> object:
    """The keys of a JSON document at every level (a list by its first item)."""
    if isinstance(payload, dict):
        return {key: shape(value) for key, value in payload.items() if key != "undefined"}
    if isinstance(payload, list):
        return [shape(payload[0])] if payload else []
    return None


def backtest_json(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["backtest", *args, "--json"])
    return result.exit_code, json.loads(result.output)


@pytest.fixture
def spec(tmp_path: Path) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text("type: uniqueness\nfield: transaction_id\n")
    return str(path)


@pytest.fixture
def folder_shape(tmp_path: Path, spec: str) -> object:
    folder = tmp_path / "finance.payments"
    write_snapshot(folder / "2026-09-01.parquet", [{"transaction_id": "t0"}])
    write_snapshot(folder / "2026-09-02.parquet", [{"transaction_id": "t0"}] * 2)
    (folder / "labels.yaml").write_text("failures: [2026-09-02]\n")
    code, payload = backtest_json(spec, "--history", str(folder))
    assert code == 0
    return shape(payload)


def test_cli_backtests_iceberg_snapshots_with_the_folder_backtest_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, folder_shape: object
) -> None:
    table = lakehouse_tables.iceberg_history(tmp_path, monkeypatch)
    labelled = labels(tmp_path, f"failures: [{table.duplicated}]\n")
    code, payload = backtest_json(
        spec, "--iceberg", table.catalog, "--table", table.table, "--labels", str(labelled)
    )
    assert code == 0, payload
    assert shape(payload) == folder_shape
    assert [row["snapshot_id"] for row in payload["per_snapshot"]] == [
        str(s) for s in (table.clean, table.duplicated, table.repaired, table.duplicated_again)
    ]
    assert (payload["true_positives"], payload["false_positives"]) == (1, 1)
    assert (payload["precision"], payload["recall"]) == (0.5, 1.0)


def test_cli_backtests_delta_versions_with_the_folder_backtest_json(
    tmp_path: Path, spec: str, folder_shape: object
) -> None:
    path = lakehouse_tables.delta_history(tmp_path)
    labelled = labels(tmp_path, "failures: [1]\n")
    code, payload = backtest_json(spec, "--delta", path, "--labels", str(labelled))
    assert code == 0, payload
    assert shape(payload) == folder_shape
    assert [row["verdict"] for row in payload["per_snapshot"]] == [
        "true_negative",
        "true_positive",
        "true_negative",
        "false_positive",
        "not_evaluable",
    ]


def test_cli_backtests_a_partition_column_with_the_folder_backtest_json(
    tmp_path: Path, spec: str, folder_shape: object
) -> None:
    path = partitioned_file(tmp_path)
    labelled = labels(tmp_path, "failures: [2026-09-02, 2026-09-03]\n")
    code, payload = backtest_json(
        spec, "--table", str(path), "--partition-column", "load_date", "--labels", str(labelled)
    )
    assert code == 0, payload
    assert shape(payload) == folder_shape
    assert (payload["precision"], payload["recall"]) == (0.5, 0.5)
    assert payload["datasets"][0]["dataset"] == "payments"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ([], "no history given"),
        (["--iceberg", "reflex"], "--iceberg CATALOG needs --table"),
        (["--delta", "d", "--iceberg", "i", "--table", "t"], "name two tables"),
        (["--history", "h", "--labels", "l.yaml"], "a history folder keeps its own labels.yaml"),
        (["--delta", "d", "--partition-column", "c"], "partitions of --table"),
        (["--table", "payments.parquet"], "give --partition-column COL"),
        (["--table", "t", "--partition-column", "c", "--engine", "nope"], "no engine 'nope'"),
    ],
)
def test_cli_table_options_that_name_no_one_history_are_bad_input(
    spec: str, args: list[str], error: str
) -> None:
    code, payload = backtest_json(spec, *args)
    assert code == 2
    assert error in payload["error"]


def test_iceberg_snapshots_are_judged_concurrently_each_worker_reading_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = lakehouse_tables.iceberg_history(tmp_path, monkeypatch)
    history = iceberg_history(table.catalog, table.table)
    together = threading.Barrier(2, timeout=30)  # passes only with two judged at once
    workers: set[int] = set()
    judge = backtest_engine._judge

    def two_at_once(worker: Engine, *rest: Any) -> Any:
        workers.add(id(worker))
        together.wait()
        return judge(worker, *rest)

    monkeypatch.setattr(backtest_engine, "_judge", two_at_once)
    report = backtest(TXN, [history], workers=2)
    assert len(workers) == 2
    assert [o.rows_scanned for o in report.per_snapshot] == [4, 5, 4, 6]
    assert [o.flagged for o in report.per_snapshot] == [False, True, False, True]


def test_a_partition_column_is_a_history_on_postgres_too(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """The same partitions, listed and judged inside a real server: the same exact metrics."""
    days = pq.read_table(partitioned_file(tmp_path)).to_pylist()
    create_table(postgres_server, ("finance", "daily_payments"), days)
    engine = PostgresEngine(postgres_server.url())
    report = backtest_partitions(engine, TableTarget("finance.daily_payments"), tmp_path)
    assert [o.rows_scanned for o in report.per_snapshot] == [2, 3, 3, 2]
    assert report.datasets[0].dataset == "finance.daily_payments"


def test_the_embedded_engine_refuses_a_history_of_server_tables() -> None:
    """A table's partitions listed on a server are no history the embedded engine can judge:
    bad input naming the history, not a backtest where nothing was evaluable."""
    point = HistoryPoint("2026-09-01", TableTarget("finance.payments", "load_date", "2026-09-01"))
    history = History(
        dataset="finance.payments",
        folder=None,
        snapshots=(),
        labels={},
        table="finance.payments partitioned by load_date",
        table_points=(point,),
    )
    with pytest.raises(ReflexError, match=r"the duckdb engine does not read the history of"):
        backtest(TXN, [history])
