"""Iceberg snapshots and Delta versions read by the embedded engine as Arrow (DESIGN §8): a
control runs on one snapshot or version as `control run` runs it on a file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
import pyarrow as pa
import pytest
from click.testing import CliRunner

from reflex_actions.backtest.history import delta_history as load_delta_history
from reflex_actions.backtest.history import iceberg_history as load_iceberg_history
from reflex_actions.cli.targets import TargetOptions, open_target, target_options
from reflex_actions.controls import parse_control_spec
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.engines import lakehouse
from reflex_actions.engines.base import DeltaTarget, EngineError, FileTarget, IcebergTarget
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.engines.lakehouse import IcebergTables, load_iceberg_table
from reflex_actions.errors import SchemaDriftError, SnapshotNotFoundError, SnapshotUnreadableError
from reflex_actions.executor import run_control
from tests.engines.lakehouse_tables import SCHEMA, delta_history, iceberg_history, txn

if TYPE_CHECKING:
    from pyiceberg.table import Table as IcebergTable

TXN = UniquenessControl(field="transaction_id")


def test_a_control_runs_on_one_iceberg_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = iceberg_history(tmp_path, monkeypatch)
    engine = DuckDBEngine()
    try:
        at = {
            snapshot: run_control(
                TXN, IcebergTarget(table.catalog, table.table, snapshot), engine=engine
            )
            for snapshot in (table.clean, table.duplicated, table.repaired)
        }
        current = run_control(TXN, IcebergTarget(table.catalog, table.table), engine=engine)
    finally:
        engine.close()
    failed = at[table.duplicated]
    assert (failed.passed, failed.violation_count, failed.rows_scanned) == (False, 1, 5)
    assert failed.sample == [{"key": {"transaction_id": "t0"}, "occurrences": 2}]
    assert failed.snapshot_id == str(table.duplicated)
    assert failed.snapshot == f"iceberg:reflex/finance.payments@{table.duplicated}"
    assert [(r.passed, r.rows_scanned) for r in (at[table.clean], at[table.repaired])] == [
        (True, 4),
        (True, 4),
    ]
    assert (current.passed, current.rows_scanned, current.snapshot_id) == (False, 6, "current")


def test_a_control_runs_on_one_delta_version(tmp_path: Path) -> None:
    path = delta_history(tmp_path)
    results = [run_control(TXN, DeltaTarget(path, version)) for version in (0, 1, 3)]
    assert [(r.passed, r.violation_count, r.rows_scanned) for r in results] == [
        (True, 0, 3),
        (False, 1, 3),
        (False, 1, 3),
    ]
    assert results[1].sample == [{"key": {"transaction_id": "t1"}, "occurrences": 2}]
    assert results[1].snapshot == f"delta:{path}@v1"


@pytest.mark.parametrize(
    ("bounds", "violations", "shown"),
    [({"max": 3}, 1, ["nan"]), ({"min": 5}, 2, ["1.0", "3.0"])],  # a NaN is above every number
)
def test_a_delta_version_s_doubles_are_compared_natively_a_nan_counted_as_on_parquet(
    tmp_path: Path, bounds: dict[str, int], violations: int, shown: list[str]
) -> None:
    """An Arrow table has no statistics to hide a NaN from DuckDB's filter: a DOUBLE column is
    compared in its own type and counts as its text read as a DOUBLE does."""
    from deltalake import write_deltalake

    path = str(tmp_path / "amounts")
    write_deltalake(path, pa.table({"amount": pa.array([1.0, float("nan"), 3.0, None])}))
    control = parse_control_spec({"type": "value_range", "field": "amount", **bounds})
    engine = DuckDBEngine()
    try:
        relation = engine.relation(DeltaTarget(path, 0), control.required_columns())
        result = run_control(control, DeltaTarget(path, 0), engine=engine)
    finally:
        engine.close()
    assert relation.types == {"amount": "DOUBLE"} and relation.filters_see_nans
    assert (result.rows_scanned, result.violation_count) == (4, violations)
    assert [row["value"] for row in result.sample] == shown


def test_only_the_columns_a_control_names_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = iceberg_history(tmp_path, monkeypatch)
    delta = DeltaTarget(delta_history(tmp_path), 2)
    engine = DuckDBEngine()
    try:
        iceberg = IcebergTarget(table.catalog, table.table, table.clean)
        for target in (iceberg, delta):
            assert dict(engine.relation(target, ["transaction_id"]).types) == {
                "transaction_id": "VARCHAR"
            }
            # a control naming no column (a row count, the whole schema) reads every one
            assert dict(engine.relation(target, []).types) == {
                "transaction_id": "VARCHAR",
                "amount": "BIGINT",
            }
    finally:
        engine.close()


def test_a_version_lacking_a_column_is_schema_drift_naming_it(tmp_path: Path) -> None:
    target = DeltaTarget(delta_history(tmp_path), 4)
    with pytest.raises(SchemaDriftError, match=r"missing column\(s\) 'transaction_id'.*'txn_ref'"):
        run_control(TXN, target)


def test_a_volume_control_counts_an_iceberg_snapshot_read_with_no_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = iceberg_history(tmp_path, monkeypatch)
    volume = parse_control_spec({"type": "volume", "max_drop": 0.5})
    target = IcebergTarget(table.catalog, table.table, table.repaired)
    result = run_control(volume, target, earlier_counts=[10])
    assert (result.passed, result.rows_scanned, result.earlier_counts) == (False, 4, [10])


def test_unknown_tables_snapshots_and_catalogs_are_errors_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = iceberg_history(tmp_path, monkeypatch)
    with pytest.raises(SnapshotNotFoundError, match="has no snapshot 42"):
        run_control(TXN, IcebergTarget(table.catalog, table.table, 42))
    with pytest.raises(SnapshotNotFoundError, match=r"no Iceberg table 'finance\.nothing'"):
        run_control(TXN, IcebergTarget(table.catalog, "finance.nothing"))
    with pytest.raises(EngineError, match="cannot open the Iceberg catalog 'elsewhere'"):
        run_control(TXN, IcebergTarget("elsewhere", table.table))
    with pytest.raises(SnapshotNotFoundError, match="cannot read the Delta table"):
        load_delta_history(str(tmp_path / "no-such-table"))
    delta = delta_history(tmp_path)
    with pytest.raises(
        SnapshotNotFoundError, match="has no version 9; its log holds versions 0 to 4"
    ):
        run_control(TXN, DeltaTarget(delta, 9))


def test_each_iceberg_snapshot_and_delta_version_is_a_point_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = iceberg_history(tmp_path, monkeypatch)
    iceberg = load_iceberg_history(table.catalog, table.table)
    expected = [table.clean, table.duplicated, table.repaired, table.duplicated_again]
    assert [point.target for point in iceberg.points] == [
        IcebergTarget(table.catalog, table.table, snapshot) for snapshot in expected
    ]
    times = [iceberg.as_of_ms(str(snapshot)) for snapshot in expected]
    assert None not in times and times == sorted(times)  # each judged as of its commit
    delta = load_delta_history(delta_history(tmp_path))
    assert [point.snapshot_id for point in delta.points] == ["0", "1", "2", "3", "4"]
    assert delta.dataset == "payments"


def test_a_snapshot_from_before_a_column_was_added_is_schema_drift(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.types import StringType

    table = iceberg_history(tmp_path, monkeypatch)
    loaded = load_iceberg_table(table.catalog, table.table)
    with loaded.update_schema() as update:
        update.add_column("currency", StringType())
    currency = UniquenessControl(field="currency")
    with pytest.raises(SchemaDriftError, match=r"missing column\(s\) 'currency'"):
        run_control(currency, IcebergTarget(table.catalog, table.table, table.clean))


def test_a_worker_holds_one_arrow_table_per_parameter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the next point under the same parameter releases the previous one's rows; a
    parent's, read under another parameter beside it, stays."""
    table = iceberg_history(tmp_path, monkeypatch)
    engine = DuckDBEngine()
    try:
        first = engine.relation(IcebergTarget(table.catalog, table.table, table.clean))
        parent = engine.relation(
            IcebergTarget(table.catalog, table.table, table.duplicated), parameter="reference"
        )
        second = engine.relation(IcebergTarget(table.catalog, table.table, table.repaired))
        assert engine.fetch(
            f"SELECT count(*) FROM ({parent.source.sql(dialect='duckdb')})", {}
        ) == [(5,)]
        assert engine.fetch(
            f"SELECT count(*) FROM ({second.source.sql(dialect='duckdb')})", {}
        ) == [(4,)]
        with pytest.raises(SnapshotUnreadableError, match="does not exist"):
            engine.fetch(f"SELECT count(*) FROM ({first.source.sql(dialect='duckdb')})", {})
    finally:
        engine.close()


def test_workers_read_their_points_on_their_own_cursors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers of one engine read two snapshots at once, neither seeing the other's."""
    table = iceberg_history(tmp_path, monkeypatch)
    engine = DuckDBEngine()
    workers = [engine.worker(), engine.worker()]
    try:
        clean, duplicated = (
            worker.relation(IcebergTarget(table.catalog, table.table, snapshot))
            for worker, snapshot in zip(workers, (table.clean, table.duplicated), strict=True)
        )
        assert workers[0].fetch(
            f"SELECT count(*) FROM ({clean.source.sql(dialect='duckdb')})", {}
        ) == [(4,)]
        assert workers[1].fetch(
            f"SELECT count(*) FROM ({duplicated.source.sql(dialect='duckdb')})", {}
        ) == [(5,)]
        with pytest.raises(SnapshotUnreadableError, match="does not exist"):
            workers[0].fetch(
                f"SELECT count(*) FROM ({duplicated.source.sql(dialect='duckdb')})", {}
            )
    finally:
        for worker in workers:
            worker.close()
        engine.close()


def test_the_cli_target_options_open_the_engine_and_the_snapshot_they_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `control run --iceberg/--delta` runs on: the options of cli/targets.py, through
    `open_target`, judged by run_control on the engine they open."""
    table = iceberg_history(tmp_path, monkeypatch)
    delta = delta_history(tmp_path)
    judged: dict[str, tuple[bool, int]] = {}

    @click.command()
    @target_options
    def run(targets: TargetOptions) -> None:
        engine, target = open_target(targets)
        try:
            result = run_control(TXN, target, engine=engine)
        finally:
            engine.close()
        judged[target.shown] = (result.passed, result.rows_scanned)

    snapshot = str(table.duplicated)
    for args in (
        ["--iceberg", table.catalog, "--table", table.table, "--snapshot-id", snapshot],
        ["--delta", delta, "--version", "0"],
    ):
        outcome = CliRunner().invoke(run, args, catch_exceptions=False)
        assert outcome.exit_code == 0, outcome.output
    assert judged == {
        f"iceberg:reflex/finance.payments@{snapshot}": (False, 5),
        f"delta:{delta}@v0": (True, 3),
    }


def test_an_engine_reading_no_lakehouse_table_refuses_one_naming_it() -> None:
    class FilesOnly(DuckDBEngine):
        targets = (FileTarget,)

    engine = FilesOnly()
    try:
        with pytest.raises(EngineError, match="the duckdb engine does not read delta:d@v2"):
            TargetOptions(delta="d", version=2).target(engine)
    finally:
        engine.close()


def test_a_loaded_iceberg_table_reads_the_snapshots_it_lists_and_is_loaded_anew_for_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = iceberg_history(tmp_path, monkeypatch)
    loads: list[str] = []

    def counted(catalog: str, name: str) -> IcebergTable:
        loads.append(name)
        return load_iceberg_table(catalog, name)

    monkeypatch.setattr(lakehouse, "load_iceberg_table", counted)
    tables = IcebergTables(max_tables=1)
    first = tables.table(table.catalog, table.table, table.clean)
    assert tables.table(table.catalog, table.table, table.duplicated) is first
    assert len(loads) == 1  # every snapshot it lists is read with one catalog read

    load_iceberg_table(table.catalog, table.table).append(txn("t7"))  # committed since
    newest = load_iceberg_table(table.catalog, table.table).current_snapshot().snapshot_id
    assert tables.table(table.catalog, table.table, newest).snapshot_by_id(newest) is not None
    assert len(loads) == 2
    current = tables.table(table.catalog, table.table)  # the current one: always asked anew
    assert len(loads) == 3 and current.current_snapshot().snapshot_id == newest

    refunds = first.catalog.create_table("finance.refunds", schema=SCHEMA)
    refunds.append(txn("r0"))
    tables.table(table.catalog, "finance.refunds", refunds.current_snapshot().snapshot_id)
    tables.table(table.catalog, table.table, table.clean)  # refunds took its place
    assert loads[3:] == ["finance.refunds", table.table]
