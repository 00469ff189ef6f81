"""Landing on lakehouse tables (issue 15, item 5): an ``operation`` naming no file on a covered
Iceberg or Delta dataset runs the control on its table at the commit that was the latest when
the operation was reported (``histories.iceberg_catalog``, ``histories.delta_root``), the same
commit however late the event is handled; a table with no commit by then, or none at all, is
an ERROR run naming why, never an incident."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    DataPlatformInstanceClass,
    IncidentInfoClass,
)
from pydantic import ValidationError

from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import HistoriesConfig
from reflex_actions.engines import lakehouse
from reflex_actions.engines.base import DeltaTarget, IcebergTarget
from reflex_actions.handlers.landing_runs import on_operation
from reflex_actions.handlers.runs import data_at
from tests.catalog.memory_catalog import MemoryCatalog
from tests.engines.lakehouse_tables import CATALOG, SCHEMA, txn
from tests.handlers.builders import (
    STEWARD,
    add_dataset,
    context,
    landed_on,
    published_lesson,
    seed,
    written,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table as IcebergTable

ON_ICEBERG = "urn:li:dataset:(urn:li:dataPlatform:iceberg,finance.payments,PROD)"
ON_DELTA = "urn:li:dataset:(urn:li:dataPlatform:delta-lake,payments,PROD)"
APPROVED_AT = 100


def covered(dataset: str, histories: dict[str, object], instance: str | None = None):
    catalog = MemoryCatalog()
    add_dataset(catalog, dataset)
    if instance is not None:  # as DataHub's sources record a platform instance's datasets
        platform = "urn:li:dataPlatform:iceberg"
        recorded = DataPlatformInstanceClass(platform=platform, instance=instance)
        seed(catalog, acting_as(STEWARD, dataset, recorded))
    published_lesson(catalog, approved_at=APPROVED_AT, dataset=dataset)
    return context(catalog, histories=histories)


def one_run(ctx) -> AssertionRunEventClass:
    (run,) = written(ctx, AssertionRunEventClass)
    return run


def later() -> None:
    """Commits a few milliseconds apart, so each has a time of its own."""
    time.sleep(0.02)


def iceberg_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """``finance.payments``: a clean commit, then one appending a duplicate; (snapshot id,
    commit time) of each, oldest first."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    for setting, value in (("TYPE", "sql"), ("URI", uri), ("WAREHOUSE", warehouse)):
        monkeypatch.setenv(prefix + setting, value)
    catalog = SqlCatalog(CATALOG, uri=uri, warehouse=warehouse)
    catalog.create_namespace("finance")
    table = catalog.create_table("finance.payments", schema=SCHEMA)
    commits = []
    for rows in (txn("t0", "t1"), txn("t1")):
        table.append(rows)
        snapshot = table.current_snapshot()
        commits.append((snapshot.snapshot_id, snapshot.timestamp_ms))
        later()
    return commits


def delta_table(root: Path) -> list[int]:
    """``payments`` under ``root``: version 0 clean, version 1 with a duplicate; the commit
    time of each."""
    from deltalake import DeltaTable, write_deltalake

    path = str(root / "payments")
    for rows in (txn("t0", "t1"), txn("t0", "t0", "t1")):
        write_deltalake(path, rows, mode="overwrite")
        later()
    history = {entry["version"]: entry["timestamp"] for entry in DeltaTable(path).history()}
    return [history[0], history[1]]


def test_an_operation_on_an_iceberg_dataset_runs_on_the_snapshot_current_when_it_was_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean, clean_at), (duplicated, duplicated_at) = iceberg_table(tmp_path, monkeypatch)
    histories = {"iceberg_catalog": CATALOG}

    early = covered(ON_ICEBERG, histories)
    on_operation(landed_on(ON_ICEBERG, clean_at), early)  # handled after the next commit
    run = one_run(early)
    assert run.runId == str(clean)
    assert run.result.type == "SUCCESS" and run.result.rowCount == 2
    assert written(early, IncidentInfoClass) == []

    late = covered(ON_ICEBERG, histories)
    on_operation(landed_on(ON_ICEBERG, duplicated_at + 5), late)
    run = one_run(late)
    assert run.runId == str(duplicated)
    assert run.result.type == "FAILURE"
    assert run.result.nativeResults["violation_count"] == "1"  # t1 twice after the append
    assert run.result.rowCount == 3
    assert len(written(late, IncidentInfoClass)) == 1


def test_an_operation_on_a_delta_dataset_runs_on_the_version_current_when_it_was_reported(
    tmp_path: Path,
) -> None:
    first_at, second_at = delta_table(tmp_path / "lake")
    histories = {"delta_root": tmp_path / "lake"}

    early = covered(ON_DELTA, histories)
    on_operation(landed_on(ON_DELTA, first_at), early)
    run = one_run(early)
    assert (run.runId, run.result.type, run.result.rowCount) == ("0", "SUCCESS", 2)

    late = covered(ON_DELTA, histories)
    on_operation(landed_on(ON_DELTA, second_at), late)
    run = one_run(late)
    assert (run.runId, run.result.type, run.result.rowCount) == ("1", "FAILURE", 3)
    assert len(written(late, IncidentInfoClass)) == 1


def test_a_table_with_no_commit_by_then_is_an_error_run_naming_it(tmp_path: Path) -> None:
    first_at, _ = delta_table(tmp_path / "lake")
    ctx = covered(ON_DELTA, {"delta_root": tmp_path / "lake"})

    on_operation(landed_on(ON_DELTA, first_at - 60_000), ctx)

    run = one_run(ctx)
    assert run.result.type == "ERROR" and written(ctx, IncidentInfoClass) == []
    assert "has no commit at or before" in run.result.error.properties["message"]


def test_a_missing_table_is_an_error_run_never_an_incident(tmp_path: Path) -> None:
    ctx = covered(ON_DELTA, {"delta_root": tmp_path / "lake"})  # nothing written there

    on_operation(landed_on(ON_DELTA, 10_000), ctx)

    run = one_run(ctx)
    assert run.result.type == "ERROR" and written(ctx, IncidentInfoClass) == []
    assert "cannot read the Delta table" in run.result.error.properties["message"]


def test_without_a_lakehouse_setting_the_operation_is_skipped(tmp_path: Path) -> None:
    delta_table(tmp_path / "lake")
    ctx = covered(ON_DELTA, {})
    on_operation(landed_on(ON_DELTA, int(time.time() * 1000)), ctx)
    assert ctx.out.directives == []


def test_the_sweep_without_an_operation_reads_the_latest_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the schedule judges a dataset on when DataHub records no operation of it."""
    _, (duplicated, _) = iceberg_table(tmp_path, monkeypatch)
    delta_table(tmp_path / "lake")
    now = int(time.time() * 1000)
    histories = {"iceberg_catalog": CATALOG, "delta_root": tmp_path / "lake"}

    on_iceberg = data_at(ON_ICEBERG, now, covered(ON_ICEBERG, histories))
    on_delta = data_at(ON_DELTA, now, covered(ON_DELTA, histories))

    assert on_iceberg == (
        (None, IcebergTarget(CATALOG, "finance.payments", duplicated)),
        str(duplicated),
    )
    assert on_delta is not None
    (engine, target), run_id = on_delta
    assert engine is None and run_id == "1"
    assert target == DeltaTarget(str((tmp_path / "lake" / "payments").resolve()), 1)


def test_a_schema_drifted_commit_is_an_error_run(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    path = tmp_path / "lake" / "payments"
    write_deltalake(str(path), pa.table({"txn_ref": ["t0"]}))
    ctx = covered(ON_DELTA, {"delta_root": tmp_path / "lake"})

    on_operation(landed_on(ON_DELTA, int(time.time() * 1000) + 1000), ctx)

    run = one_run(ctx)
    assert run.result.type == "ERROR" and written(ctx, IncidentInfoClass) == []
    assert "transaction_id" in run.result.error.properties["message"]


IN_INSTANCE = "urn:li:dataset:(urn:li:dataPlatform:iceberg,prod_lake.finance.payments,PROD)"
PROD_LAKE = "urn:li:dataPlatformInstance:(urn:li:dataPlatform:iceberg,prod_lake)"


@pytest.mark.parametrize(
    ("instance", "read"),
    [(PROD_LAKE, True), (None, False), ("not an urn", False)],
    ids=["instance-recorded", "no-instance", "malformed-instance"],
)
def test_a_platform_instance_s_prefix_is_not_part_of_the_table_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: str | None, read: bool
) -> None:
    """DataHub's iceberg source names an instance's dataset ``<instance>.<namespace>.<table>``
    and records the instance on it: the table read is ``namespace.table``."""
    _, (duplicated, duplicated_at) = iceberg_table(tmp_path, monkeypatch)
    ctx = covered(IN_INSTANCE, {"iceberg_catalog": CATALOG}, instance=instance)

    on_operation(landed_on(IN_INSTANCE, duplicated_at + 5), ctx)

    run = one_run(ctx)
    if read:
        assert (run.runId, run.result.type) == (str(duplicated), "FAILURE")
    else:  # "prod_lake.finance.payments" is no table of the catalog
        assert run.result.type == "ERROR"
        assert "prod_lake.finance.payments" in run.result.error.properties["message"]


def test_a_delta_root_given_as_a_uri_is_read_through_deltalake(tmp_path: Path) -> None:
    """An object store's root (here ``file://``, read by deltalake's object store as s3:// is):
    the table is ``<root>/<the urn's name>``."""
    _, second_at = delta_table(tmp_path / "lake")
    ctx = covered(ON_DELTA, {"delta_root": f"file://{tmp_path / 'lake'}/"})

    on_operation(landed_on(ON_DELTA, second_at), ctx)

    run = one_run(ctx)
    assert (run.runId, run.result.type, run.result.rowCount) == ("1", "FAILURE", 3)


@pytest.mark.parametrize(
    ("root", "name", "table"),
    [
        ("s3://bucket/lake", "payments", "s3://bucket/lake/payments"),
        ("s3://bucket/lake/", "sales/orders", "s3://bucket/lake/sales/orders"),
        ("s3://bucket/lake", "../other/payments", None),
        ("s3://bucket/lake", "..", None),
        ("gs://bucket", "/etc/passwd", "gs://bucket/etc/passwd"),
    ],
)
def test_a_delta_table_under_a_uri_root_stays_under_it(
    root: str, name: str, table: str | None
) -> None:
    assert HistoriesConfig(delta_root=root).delta_table(name) == table


def test_a_local_delta_root_keeps_names_inside_it(tmp_path: Path) -> None:
    config = HistoriesConfig(delta_root=tmp_path)
    assert config.delta_table("payments") == str((tmp_path / "payments").resolve())
    assert config.delta_table("../payments") is None
    assert config.delta_table(".") is None


def test_a_delta_root_on_a_store_deltalake_does_not_read_is_refused() -> None:
    with pytest.raises(ValidationError, match="'ftp' is no object store deltalake reads"):
        HistoriesConfig(delta_root="ftp://host/lake")


def test_a_landing_on_an_iceberg_dataset_reads_its_table_from_the_catalog_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit is picked and read on one load of the table (a catalog read may be a network
    call, e.g. a REST catalog)."""
    _, (duplicated, duplicated_at) = iceberg_table(tmp_path, monkeypatch)
    loads: list[str] = []
    real = lakehouse.load_iceberg_table

    def counted(catalog: str, name: str) -> IcebergTable:
        loads.append(name)
        return real(catalog, name)

    monkeypatch.setattr(lakehouse, "load_iceberg_table", counted)
    ctx = covered(ON_ICEBERG, {"iceberg_catalog": CATALOG})
    on_operation(landed_on(ON_ICEBERG, duplicated_at + 5), ctx)

    run = one_run(ctx)
    assert (run.runId, run.result.type) == (str(duplicated), "FAILURE")
    assert loads == ["finance.payments"]
