"""Lakehouse tables for tests: an Iceberg table in a pyiceberg SQL catalog on SQLite with a
local warehouse folder, and a Delta table in a folder; both written with real commits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

CATALOG = "reflex"
SCHEMA = pa.schema([("transaction_id", pa.string()), ("amount", pa.int64())])


def txn(*ids: str, amount: int = 1) -> pa.Table:
    return pa.table({"transaction_id": list(ids), "amount": [amount] * len(ids)}, schema=SCHEMA)


@dataclass(frozen=True)
class IcebergHistory:
    """An Iceberg table's snapshot ids, oldest first, and what each holds."""

    catalog: str
    table: str
    #: snapshot ids: clean, a duplicate appended, the duplicate deleted, two duplicates appended
    clean: int
    duplicated: int
    repaired: int
    duplicated_again: int


def iceberg_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IcebergHistory:
    """``finance.payments`` in the catalog ``reflex_test``, configured as pyiceberg reads it
    (``PYICEBERG_CATALOG__REFLEX_TEST__*`` variables), with four snapshots."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'warehouse'}"
    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    monkeypatch.setenv(prefix + "TYPE", "sql")
    monkeypatch.setenv(prefix + "URI", uri)
    monkeypatch.setenv(prefix + "WAREHOUSE", warehouse)
    catalog = SqlCatalog(CATALOG, uri=uri, warehouse=warehouse)
    catalog.create_namespace("finance")
    table = catalog.create_table("finance.payments", schema=SCHEMA)
    ids = []
    table.append(txn("t0", "t1", "t2", "t3"))
    ids.append(table.current_snapshot().snapshot_id)
    table.append(txn("t0", amount=-1))
    ids.append(table.current_snapshot().snapshot_id)
    table.delete(EqualTo("amount", -1))
    ids.append(table.current_snapshot().snapshot_id)
    table.append(txn("t9", "t9"))
    ids.append(table.current_snapshot().snapshot_id)
    return IcebergHistory(CATALOG, "finance.payments", *ids)


def delta_history(tmp_path: Path) -> str:
    """A Delta table ``payments`` with versions 0-4: clean, a duplicate, clean, a duplicate,
    and version 4 with the key column renamed (schema drift)."""
    from deltalake import write_deltalake

    path = str(tmp_path / "payments")
    for version in (
        txn("t0", "t1", "t2"),
        txn("t0", "t1", "t1"),
        txn("t0", "t1", "t2", "t3"),
        txn("t4", "t4", "t5"),
    ):
        write_deltalake(path, version, mode="overwrite")
    write_deltalake(path, pa.table({"txn_ref": ["t0"]}), mode="overwrite", schema_mode="overwrite")
    return path
