"""Lakehouse tables read as Arrow: Apache Iceberg (pyiceberg) and Delta Lake (deltalake).

Every snapshot of an Iceberg table and every version of a Delta table is one point of the
table's history; the embedded engine reads one as an Arrow table (only the columns a control
needs, when it names them) and queries it, so no DuckDB extension is downloaded. An Iceberg
catalog is configured as pyiceberg configures it (``.pyiceberg.yaml`` or
``PYICEBERG_CATALOG__<NAME>__*`` variables), read when the catalog is opened, not when pyiceberg
was imported.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from reflex_actions.bounded import excerpt, shorten
from reflex_actions.engines.base import DeltaTarget, EngineError, IcebergTarget
from reflex_actions.errors import SchemaDriftError, SnapshotNotFoundError, SnapshotUnreadableError
from reflex_actions.times import iso

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table as IcebergTable

LakehouseTarget = IcebergTarget | DeltaTarget


@dataclass(frozen=True)
class TablePoint:
    """One point of a lakehouse table's history: its snapshot id or version, and when it was
    committed (epoch milliseconds)."""

    point: int
    committed_ms: int | None


def _reason(error: BaseException) -> str:
    return shorten(str(error) or type(error).__name__)


class IcebergTables:
    """Iceberg tables as last loaded, by catalog and name, shared by every engine of the
    process. A snapshot never changes, so a table loaded once reads every snapshot it lists (a
    backtest's hundreds, a landing's commit picked by :func:`commit_at`) with no second
    catalog read; asked for its current snapshot, or one it does not list (committed since),
    it is loaded anew. At most ``max_tables`` are kept (a loaded table holds every snapshot's
    metadata, never rows)."""

    def __init__(self, max_tables: int = 16) -> None:
        self.max_tables = max_tables
        self._loaded: dict[tuple[str, str], IcebergTable] = {}
        self._lock = threading.Lock()

    def table(self, catalog: str, name: str, snapshot: int | None = None) -> IcebergTable:
        key = (catalog, name)
        with self._lock:  # held while loading: concurrent workers load a table once
            loaded = self._loaded.pop(key, None)
            if loaded is None or snapshot is None or loaded.snapshot_by_id(snapshot) is None:
                loaded = load_iceberg_table(catalog, name)
            self._loaded[key] = loaded  # the most recently used last
            while len(self._loaded) > self.max_tables:
                del self._loaded[next(iter(self._loaded))]
            return loaded


#: The Iceberg tables this process loaded.
ICEBERG_TABLES = IcebergTables()


def load_iceberg_table(catalog: str, name: str) -> IcebergTable:
    """The table ``name`` (``namespace.table``) of the pyiceberg catalog ``catalog``."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.utils.config import Config

    try:
        # the configuration as it is now (pyiceberg reads its variables once, at import)
        opened = load_catalog(catalog, **Config().get_catalog_config(catalog) or {})
    except Exception as error:  # pyiceberg raises ValueError, OSError, driver errors alike
        raise EngineError(
            f"cannot open the Iceberg catalog {excerpt(catalog)} (configured in .pyiceberg.yaml "
            f"or PYICEBERG_CATALOG__{catalog.upper()[:60]}__* variables): {_reason(error)}"
        ) from None
    try:
        return opened.load_table(name)
    except (NoSuchTableError, NoSuchNamespaceError):
        raise SnapshotNotFoundError(
            f"no Iceberg table {excerpt(name)} in catalog {excerpt(catalog)}"
        ) from None
    except Exception as error:
        raise SnapshotUnreadableError(
            f"cannot load the Iceberg table {excerpt(name)}: {_reason(error)}"
        ) from None


def iceberg_points(table: IcebergTable) -> list[TablePoint]:
    """The table's snapshots, oldest first (by sequence number: ids are random)."""
    snapshots = sorted(table.snapshots(), key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    return [TablePoint(s.snapshot_id, s.timestamp_ms) for s in snapshots]


def delta_points(path: str) -> list[TablePoint]:
    """The table's versions still in its log, oldest first."""
    from deltalake import DeltaTable

    try:
        history = DeltaTable(path).history()
    except Exception as error:  # deltalake raises TableNotFoundError, OSError, ...
        raise SnapshotNotFoundError(
            f"cannot read the Delta table at {excerpt(path)}: {_reason(error)}"
        ) from None
    versions = {entry["version"]: entry.get("timestamp") for entry in history}
    return [TablePoint(version, versions[version]) for version in sorted(versions)]


def commit_at(target: LakehouseTarget, at_ms: int) -> LakehouseTarget:
    """The table at the commit that was its latest at ``at_ms`` (an Iceberg snapshot, a Delta
    version): what an operation reported at that time landed, the same commit however late
    the event is handled or replayed. Raise SnapshotNotFoundError when it had none by then."""
    if isinstance(target, IcebergTarget):
        points = iceberg_points(ICEBERG_TABLES.table(target.catalog, target.table))
    else:
        points = delta_points(target.path)
    by_then = [p for p in points if p.committed_ms is not None and p.committed_ms <= at_ms]
    if not by_then:
        raise SnapshotNotFoundError(
            f"{excerpt(target.shown)} has no commit at or before {iso(at_ms)}"
        )
    if isinstance(target, IcebergTarget):
        return replace(target, snapshot=by_then[-1].point)
    return replace(target, version=by_then[-1].point)


def read_arrow(target: LakehouseTarget, columns: Sequence[str]) -> pa.Table:
    """The target's snapshot or version as Arrow: only ``columns`` when it names any (every
    column otherwise: a control naming none counts rows or reads the whole schema); raise
    SchemaDriftError when it lacks one of them."""
    if isinstance(target, IcebergTarget):
        return _read_iceberg(target, columns)
    return _read_delta(target, columns)


def _check_columns(target: LakehouseTarget, available: list[str], required: Sequence[str]) -> None:
    missing = [name for name in required if name not in available]
    if missing:
        raise SchemaDriftError(target.shown, missing, available)


def _read_iceberg(target: IcebergTarget, columns: Sequence[str]) -> pa.Table:
    table = ICEBERG_TABLES.table(target.catalog, target.table, target.snapshot)
    snapshot = table.snapshot_by_id(target.snapshot) if target.snapshot is not None else None
    if target.snapshot is not None and snapshot is None:
        raise SnapshotNotFoundError(
            f"the Iceberg table {excerpt(target.table)} has no snapshot {target.snapshot}"
        )
    # a snapshot's own schema: a column added later is no column of an earlier snapshot
    schema = table.schemas().get(snapshot.schema_id) if snapshot is not None else None
    _check_columns(target, (schema or table.schema()).column_names, columns)
    try:
        scan = table.scan(
            snapshot_id=target.snapshot, selected_fields=tuple(columns) if columns else ("*",)
        )
        return scan.to_arrow()
    except Exception as error:
        raise SnapshotUnreadableError(f"cannot read {target.shown}: {_reason(error)}") from None


def _no_delta_version(target: DeltaTarget) -> str | None:
    """Why the table has no ``target.version`` when it reads otherwise (a version beyond its
    latest, or one its log no longer holds), naming the versions it has; None otherwise."""
    if target.version is None:
        return None
    try:
        versions = [point.point for point in delta_points(target.path)]
    except SnapshotNotFoundError:
        return None
    if not versions or target.version in versions:
        return None
    return (
        f"the Delta table at {excerpt(target.path)} has no version {target.version}; its log "
        f"holds versions {versions[0]} to {versions[-1]}"
    )


def _read_delta(target: DeltaTarget, columns: Sequence[str]) -> pa.Table:
    from deltalake import DeltaTable

    try:
        table = DeltaTable(target.path, version=target.version)
    except Exception as error:
        raise SnapshotNotFoundError(
            _no_delta_version(target) or f"cannot read {target.shown}: {_reason(error)}"
        ) from None
    _check_columns(target, [field.name for field in table.schema().fields], columns)
    try:
        return table.to_pyarrow_table(columns=list(columns) if columns else None)
    except Exception as error:
        raise SnapshotUnreadableError(f"cannot read {target.shown}: {_reason(error)}") from None
