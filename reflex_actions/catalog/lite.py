"""The embedded store: DataHub Lite on SQLite, with indexes for Reflex's lookups.

DataHub Lite keeps every aspect version in ``metadata_aspect_v2`` (version 0 mirrors the latest)
but has no index by domain, field, owner or lineage. Reflex keeps one (``reflex_index``) in the
same file, brought up to date from the versioned rows written since it last looked, so it stays
right whoever wrote the store (Reflex, the steward CLI, or ``datahub ingest`` with the Lite sink).

Writes from several processes are serialized with a file lock beside the database: Lite computes
the next version with a read-then-insert that two writers would race on. A command that only
reads opens the store with ``access="read"``: it creates no store, folder or lock file, and
brings a stale index up to date in a private copy (temp tables) instead of in the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    DomainsClass,
    OwnerClass,
    OwnershipClass,
    SchemaMetadataClass,
    StructuredPropertiesClass,
    SystemMetadataClass,
    UpstreamLineageClass,
    _Aspect,
)
from datahub.utilities.urns.dataset_urn import DatasetUrn

from reflex_actions.bounded import safe_excerpt
from reflex_actions.catalog.base import AspectT, Catalog, CatalogError, Written
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.steward import ACTOR_PROPERTY, acting_as, merge_structured_properties
from reflex_actions.catalog.translate import (
    DATASET_ASPECTS,
    dataset_context,
    simple_field_path,
)
from reflex_actions.safe_files import open_lock_file

logger = logging.getLogger(__name__)

#: Aspects whose changes move Reflex's lookup index, and the index kinds each one feeds.
INDEXED_ASPECTS = {
    DomainsClass.ASPECT_NAME: "domain",
    SchemaMetadataClass.ASPECT_NAME: "field",
    OwnershipClass.ASPECT_NAME: "owner",
    UpstreamLineageClass.ASPECT_NAME: "upstream",
}

#: Reflex's index, created in ``{schema}``: ``main`` (the file), or ``temp`` for a reader's copy.
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {schema}.reflex_index ("
    " kind TEXT NOT NULL, value TEXT NOT NULL, urn TEXT NOT NULL,"
    " PRIMARY KEY (kind, value, urn)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS {schema}.reflex_index_by_urn ON reflex_index (urn, kind)",
    "CREATE TABLE IF NOT EXISTS {schema}.reflex_index_state ("
    " id INTEGER PRIMARY KEY CHECK (id = 1), last_rowid INTEGER NOT NULL)",
)
_INDEX_TABLES = ("reflex_index", "reflex_index_state")
#: The timeseries fields ``timeseries_written`` filters on: each has an index, so an
#: assertion's runs of one id are found without reading every run it ever had.
_INDEXED_FIELDS = ("runId",)


def _field_of(name: str) -> str:
    """A timeseries field of a stored value, as its index and its queries spell it (no JSON
    error from a row that is not JSON: another writer's malformed row stays writable)."""
    return f"iif(json_valid(metadata), json_extract(metadata, '$.{name}'), NULL)"


_RUN_IDS = (
    "CREATE INDEX IF NOT EXISTS reflex_run_ids ON metadata_aspect_v2"
    f" (urn, aspect_name, {_field_of('runId')})"
)

#: How a store is opened: ``create`` it if missing (``init``, ``load``, the action), ``write``
#: to an existing one only (a steward's edit), ``read`` an existing one and write nothing.
Access = Literal["create", "write", "read"]
#: A store named by a URL (``http://host``; a path keeps one of its slashes): a server's
#: address, which no file has. Two letters at least: ``C:/`` is a drive, not a scheme.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")

if TYPE_CHECKING:
    from datahub.ingestion.graph.client import DataHubGraph

    from reflex_actions.config import ReflexConfig


def _actor_in(system_metadata: str | None) -> str | None:
    """The acting user of an embedded write: Lite has no audit column, so it is in the write's
    system metadata."""
    try:
        properties = (json.loads(system_metadata or "null") or {}).get("properties") or {}
    except (TypeError, ValueError, AttributeError):
        return None
    writer = properties.get(ACTOR_PROPERTY)
    return writer if isinstance(writer, str) else None


class _Lite(SqliteLite):
    """SqliteLite that closes without rebuilding the whole browse index, and writes a batch in
    one transaction.

    ``SqliteLite.close`` calls ``reindex()``, which re-reads every entity: O(store) on every
    close. Reflex's writes keep the edges current incrementally; ``LiteCatalog.reindex`` remains
    for after bulk loads.
    """

    #: how many ``one_transaction`` blocks are open: a write's commit waits for the outermost
    _depth = 0

    def close(self) -> None:
        self._close_connection()

    @contextlib.contextmanager
    def one_transaction(self) -> Iterator[None]:
        """Every write in the block commits once, at the end of the outermost block: a batch
        of aspects (a whole decision) costs one commit (an fsync in WAL mode), not one each,
        and a failure anywhere rolls back all of them."""
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self.sqlite_client.rollback()
            raise
        self._depth -= 1
        if self._depth == 0:
            self.sqlite_client.commit()

    def _commit(self) -> None:
        if self._depth == 0:
            super()._commit()

    def write_batch(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        """``SqlBackedLite.write`` of each MCP in turn, row for row (the same versions, JSON,
        statements and order), with two costs taken out: each aspect is serialised once (Lite
        serialises the whole MCP envelope through avrogen, then parses the aspect back out of
        it), and the current rows of the batch are read in one query per aspect name, not one
        per MCP (the batch holds the write lock, so nothing else writes meanwhile). An MCP
        this does not reproduce exactly (a key aspect, headers, no aspect) goes to Lite's own
        ``write``."""
        try:
            current = self._current_rows(mcps)
        except Exception as error:
            raise _WriteFailed(mcps[0], error) from error
        for mcp in mcps:
            key = (getattr(mcp, "entityUrn", None), getattr(mcp, "aspectName", None))
            try:
                if not _plain(mcp) or key not in current:
                    if isinstance(mcp, MetadataChangeProposalWrapper):
                        current.pop(key, None)  # Lite's write changes its row: read it again
                    else:  # an MCE: Lite writes each of its aspects
                        current.clear()
                    self.write(mcp)
                    continue
                try:
                    current[key] = self._write_one(mcp, current[key])
                except Exception:
                    self._rollback()
                    logger.error("Failed to write %s", mcp, exc_info=True)
                    raise
            except Exception as error:
                raise _WriteFailed(mcp, error) from error

    def _current_rows(
        self, mcps: Sequence[MetadataChangeProposalWrapper]
    ) -> dict[tuple[str | None, str | None], tuple[str, str] | None]:
        """The version-0 row (metadata, system metadata) of each plain MCP's aspect, None
        where it has none, read in one query per aspect name and chunk."""
        urns_by_name: dict[str, set[str]] = {}
        for mcp in mcps:
            if _plain(mcp):
                assert mcp.entityUrn is not None and mcp.aspectName is not None
                urns_by_name.setdefault(mcp.aspectName, set()).add(mcp.entityUrn)
        found: dict[tuple[str | None, str | None], tuple[str, str] | None] = {}
        for name, urns in urns_by_name.items():
            ordered = sorted(urns)
            for start in range(0, len(ordered), _CHUNK):
                chunk = ordered[start : start + _CHUNK]
                found.update(dict.fromkeys(((urn, name) for urn in chunk), None))
                rows = self.sqlite_client.execute(
                    "SELECT urn, metadata, system_metadata FROM metadata_aspect_v2"
                    f" WHERE urn IN ({','.join('?' * len(chunk))}) AND aspect_name = ?"
                    " AND version = 0",
                    [*chunk, name],
                ).fetchall()
                found.update(((urn, name), (metadata, system)) for urn, metadata, system in rows)
        return found

    def _write_one(
        self, writeable: MetadataChangeProposalWrapper, max_row: tuple[str, str] | None
    ) -> tuple[str, str]:
        """One MCP as ``SqlBackedLite.write`` writes it, given its current row; the row it
        leaves at version 0."""
        assert writeable.aspect is not None and writeable.aspectName is not None
        urn, name = writeable.entityUrn, writeable.aspectName
        # What ``writeable.to_obj(simplified_structure=True)`` holds: the aspect's JSON (the
        # envelope's copy of it, parsed back) and the system metadata as given.
        aspect_json = json.loads(json.dumps(pre_json_transform(writeable.aspect.to_obj())))
        given = writeable.systemMetadata
        system_dict: dict[str, Any] | None = None if given is None else _system_obj(given)
        system_metadata: dict[str, Any] = {}
        if max_row is None:
            new_version, needs_write = 1, True
        else:
            metadata_dict = json.loads(max_row[0])
            system_metadata = json.loads(max_row[1])
            real_version = system_metadata.get("properties", {}).get("sysVersion")
            if real_version is None:
                max_version_row = self._execute_one(
                    "SELECT max(version) FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ?",
                    [urn, name],
                )
                assert max_version_row
                real_version = max_version_row[0]
            real_version = int(real_version)
            needs_write = aspect_json != metadata_dict
            new_version = real_version + 1 if needs_write else real_version
        created_on = int(time.time() * 1000.0)
        if given is not None and given.lastObserved:
            created_on = given.lastObserved
        if given is None:
            writeable.systemMetadata = SystemMetadataClass(lastObserved=created_on, properties={})
        elif given.lastObserved is None:
            given.lastObserved = created_on
        assert writeable.systemMetadata is not None
        if system_dict is None:
            system_dict = writeable.systemMetadata.to_obj()
        if "properties" not in system_dict:
            system_dict["properties"] = {}
        system_dict["properties"]["sysVersion"] = str(new_version)
        if not needs_write:  # a dup: Lite still updates its lastObserved
            assert max_row is not None
            if not system_metadata:
                system_metadata = {"lastObserved": writeable.systemMetadata.lastObserved}
            else:
                system_metadata["lastObserved"] = writeable.systemMetadata.lastObserved
            system_text = json.dumps(system_metadata)
            self._execute(
                "UPDATE metadata_aspect_v2 SET system_metadata = ? WHERE urn = ?"
                " AND aspect_name = ? AND version = 0",
                [system_text, urn, name],
            )
            return max_row[0], system_text
        metadata_text, system_text = json.dumps(aspect_json), json.dumps(system_dict)
        self._execute(
            "INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?)",
            [urn, name, new_version, metadata_text, system_text, created_on],
        )
        if max_row is None:
            self._execute(
                "INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?)",
                [urn, name, 0, metadata_text, system_text, created_on],
            )
        else:
            self._execute(
                "UPDATE metadata_aspect_v2 SET metadata = ?, system_metadata = ? WHERE urn = ?"
                " AND aspect_name = ? AND version = 0",
                [metadata_text, system_text, urn, name],
            )
        assert urn is not None
        self.post_update_hook(urn, name, writeable.aspect)
        return metadata_text, system_text


class _WriteFailed(Exception):
    """``_Lite.write_batch`` failed on ``mcp`` (``error``: why)."""

    def __init__(self, mcp: MetadataChangeProposalWrapper, error: Exception) -> None:
        super().__init__(str(error))
        self.mcp, self.error = mcp, error


#: ``SystemMetadataClass.to_obj()`` of the system metadata a writer gives, by its values:
#: Reflex writes every aspect with the same few (its actor), and avrogen's conversion costs a
#: third of an aspect's.
_SYSTEM_OBJS: dict[tuple[Any, ...], dict[str, Any]] = {}
_SYSTEM_OBJS_MAX = 256


def _system_obj(system: SystemMetadataClass) -> dict[str, Any]:
    """``system.to_obj()``, a fresh copy (the caller adds to its properties). Only values of
    plain types are keyed (with their types: ``True == 1``); any other is converted anew."""
    key: list[Any] = []
    for name, value in system._inner_dict.items():
        if isinstance(value, dict):
            if not all(type(k) is str and type(v) is str for k, v in value.items()):
                return system.to_obj()
            key.append((name, dict, tuple(value.items())))
        elif value is None or type(value) in (str, int, float, bool):
            key.append((name, type(value), value))
        else:
            return system.to_obj()
    found = _SYSTEM_OBJS.get(tuple(key))
    if found is None:
        if len(_SYSTEM_OBJS) >= _SYSTEM_OBJS_MAX:
            _SYSTEM_OBJS.clear()
        found = _SYSTEM_OBJS[tuple(key)] = system.to_obj()
    return type(found)(
        (name, dict(value) if isinstance(value, dict) else value) for name, value in found.items()
    )


#: Urns bound in one query of ``_Lite._current_rows`` (SQLite's default limit is 32,766).
_CHUNK = 500


def _plain(mcp: MetadataChangeProposalWrapper) -> bool:
    """An MCP ``_Lite.write_batch`` writes itself: an upsert of one aspect of an entity named
    by its urn, whose envelope holds nothing but what Lite stores."""
    return (
        isinstance(mcp, MetadataChangeProposalWrapper)
        and mcp.aspect is not None
        and mcp.entityUrn is not None
        and mcp.entityKeyAspect is None
        and mcp.auditHeader is None
        and mcp.headers is None
        and mcp.changeType == ChangeTypeClass.UPSERT
        and mcp.aspectName == mcp.aspect.get_aspect_name()
    )


def _index_values(kind: str, value: dict[str, Any]) -> set[str]:
    """The index entries of one stored aspect, read from its JSON: converting 10,000s of rows
    into aspect classes would take the first refresh of a large store 20 s instead of 1."""
    if kind == "domain":
        return set(value.get("domains") or [])
    if kind == "field":
        return {simple_field_path(f["fieldPath"]).lower() for f in value.get("fields") or []}
    if kind == "owner":
        return {o["owner"] for o in value.get("owners") or []}
    if kind == "upstream":
        return {u["dataset"] for u in value.get("upstreams") or []}
    return set()


class StoreIsUrlError(CatalogError):
    """The store was named by a URL: a DataHub server, not a Lite file."""


def _store_file(path: str | Path) -> Path:
    """``path`` as the name of a store's file: refused when it is a URL or a folder."""
    if _URL.match(str(path)):
        raise StoreIsUrlError(f"{safe_excerpt(str(path))} is a URL, not a DataHub Lite file")
    store = Path(path)
    if store.is_dir():
        raise CatalogError(f"{store} is a folder, not a DataHub Lite file")
    return store


def _sqlite(store: Path, *, isolation_level: str | None) -> sqlite3.Connection:
    """A connection to the existing SQLite file ``store`` (never creating it), once it has
    read its schema: a file that is not SQLite is refused here, not at the first query."""
    if not store.exists():
        raise CatalogError(f"DataHub Lite store {store} does not exist")
    try:
        # mode=rw: a file removed since the check is not created again. Any thread may use it:
        # the change feed is built on one thread and read on the pipeline's worker thread.
        db = sqlite3.connect(
            f"{store.resolve().as_uri()}?mode=rw",
            uri=True,
            timeout=10,
            isolation_level=isolation_level,
            check_same_thread=False,
        )
    except sqlite3.Error as error:
        raise CatalogError(f"cannot open {store}: {error}") from None
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        db.close()
        raise CatalogError(f"cannot read {store} as SQLite: {error}") from None
    return db


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?"
    return db.execute(query, [name]).fetchone() is not None


def _lite_store(store: Path, *, isolation_level: str | None, new: bool) -> sqlite3.Connection:
    """The existing SQLite file ``store`` if it is a DataHub Lite store; or, when ``new``, one
    with no table yet, to become one (a database of anything else is not Reflex's to add to)."""
    db = _sqlite(store, isolation_level=isolation_level)
    empty = db.execute("SELECT 1 FROM sqlite_master").fetchone() is None
    if not _has_table(db, "metadata_aspect_v2") and not (new and empty):
        db.close()
        raise CatalogError(f"{store} is not a DataHub Lite store (no metadata_aspect_v2)")
    return db


def connect_store(path: str | Path, *, isolation_level: str | None = "") -> sqlite3.Connection:
    """A connection to the DataHub Lite store at ``path``, which must exist: a missing file, a
    URL, a folder, a file that is not SQLite or a SQLite file that is not a Lite store is
    refused (CatalogError saying which), and nothing is created. Every command that only reads
    a store opens it here (``lessons``, ``site``, ``status`` ...)."""
    return _lite_store(_store_file(path), isolation_level=isolation_level, new=False)


class LiteCatalog(Catalog):
    """Catalog backed by a DataHub Lite SQLite file."""

    @classmethod
    def open_for(cls, config: ReflexConfig, graph: DataHubGraph | None) -> LiteCatalog:
        if config.store is None:
            raise CatalogError("the embedded store needs `store`: the DataHub Lite file")
        return cls(config.store, access="write")  # like its change feed, it needs the store

    def __init__(self, path: str | Path, *, access: Access = "create") -> None:
        """Open the store at ``path`` as ``access`` says; a path that names no store it can
        open is refused before any file, folder or lock is made."""
        self.path = _store_file(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._lite: _Lite | None = None
        self._reader = access == "read"
        self._own_index = False
        #: this thread's decision holding the lock and its transaction (``one_decision``)
        self._deciding = threading.local()
        if self._reader:
            self._db = connect_store(self.path)
            if not all(_has_table(self._db, table) for table in _INDEX_TABLES):
                self._private_index()  # a store Reflex never opened (written by ingestion)
            return
        if access == "write" or self.path.exists():
            _lite_store(self.path, isolation_level="", new=access == "create").close()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._write_lock():
            self._lite = _Lite(
                SqliteLiteConfig(
                    file=str(self.path),
                    options={"journal_mode": "WAL", "busy_timeout": 10000},
                )
            )
            self._db = self._lite.sqlite_client
            self._create_index("main")
            self._db.execute(_RUN_IDS)
            self._db.commit()

    def _create_index(self, schema: str) -> None:
        for statement in _SCHEMA:
            self._db.execute(statement.format(schema=schema))
        self._db.execute(f"INSERT OR IGNORE INTO {schema}.reflex_index_state VALUES (1, 0)")
        self._db.commit()

    def _private_index(self) -> None:
        """A reader's own copy of the index, in temp tables (which unqualified names resolve
        to before the file's), so that bringing it up to date writes nothing to the store."""
        if self._own_index:
            return
        self._create_index("temp")
        if all(_has_table(self._db, table) for table in _INDEX_TABLES):
            for table in _INDEX_TABLES:
                self._db.execute(f"INSERT OR REPLACE INTO temp.{table} SELECT * FROM main.{table}")
            self._db.commit()
        self._own_index = True

    def _writer(self) -> _Lite:
        """DataHub Lite's writer, which only a store opened to write has (under the lock)."""
        assert self._lite is not None
        return self._lite

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        if self._reader:  # a reader takes no lock: it writes nothing
            raise CatalogError(f"{self.path} was opened to read: nothing may be written to it")
        if getattr(self._deciding, "held", False):  # within this thread's one_decision
            yield
            return
        with open_lock_file(self._lock_path) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- reads -------------------------------------------------------------------------------
    def _aspects(self, urn: str, names: Sequence[str]) -> dict[str, _Aspect]:
        rows = self._db.execute(
            "SELECT aspect_name, metadata FROM metadata_aspect_v2 "
            f"WHERE urn = ? AND version = 0 AND aspect_name IN ({','.join('?' * len(names))})",
            [urn, *names],
        ).fetchall()
        return {name: self._parsed(urn, name, metadata) for name, metadata in rows}

    def _parsed(self, urn: str, name: str, metadata: str) -> _Aspect:
        try:
            return ASPECT_MAP[name].from_obj(post_json_transform(json.loads(metadata)))
        except Exception as error:  # a hand-edited or truncated row: name it, do not crash
            raise CatalogError(
                f"malformed {name} aspect on {urn} in {self.path}: {error}"
            ) from None

    def get_aspect(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        aspect = self._aspects(urn, [aspect_class.ASPECT_NAME]).get(aspect_class.ASPECT_NAME)
        return aspect if isinstance(aspect, aspect_class) else None

    def aspect_writer(self, urn: str, aspect_class: type[AspectT]) -> str | None:
        row = self._db.execute(
            "SELECT system_metadata FROM metadata_aspect_v2 "
            "WHERE urn = ? AND aspect_name = ? AND version = 0",
            [urn, aspect_class.ASPECT_NAME],
        ).fetchone()
        return None if row is None else _actor_in(row[0])

    def latest_timeseries(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        # Lite keeps timeseries aspects like versioned ones: version 0 is the latest written.
        return self.get_aspect(urn, aspect_class)

    def timeseries_written(
        self,
        urn: str,
        aspect_class: type[AspectT],
        *,
        limit: int,
        where: Mapping[str, str] | None = None,
    ) -> list[Written[AspectT]]:
        # Lite keeps every write as a version, with its acting user in its system metadata.
        # A field's path is written out (one of _INDEXED_FIELDS, so its index serves the
        # query); its value is bound.
        unknown = set(where or {}) - set(_INDEXED_FIELDS)
        if unknown:
            raise CatalogError(f"the embedded store filters timeseries on {_INDEXED_FIELDS} only")
        conditions = "".join(f" AND {_field_of(field)} = ?" for field in where or {})
        version = "+version" if where else "version"  # "+": let the field's index serve it
        rows = self._db.execute(
            "SELECT metadata, system_metadata FROM metadata_aspect_v2 WHERE urn = ?"
            f" AND aspect_name = ?{conditions} AND {version} > 0 ORDER BY {version} DESC LIMIT ?",
            [urn, aspect_class.ASPECT_NAME, *(where or {}).values(), limit],
        ).fetchall()
        name = aspect_class.ASPECT_NAME
        return [
            Written(aspect, _actor_in(system))
            for metadata, system in rows
            if isinstance(aspect := self._parsed(urn, name, metadata), aspect_class)
        ]

    def recent_timeseries(self, urn: str, aspect_class: type[AspectT], limit: int) -> list[AspectT]:
        """The last ``limit`` values written of a timeseries aspect, newest first (e.g. an
        assertion's recent runs for the static site). Lite keeps every write as a version."""
        rows = self._db.execute(
            "SELECT metadata FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ?"
            " AND version > 0 ORDER BY version DESC LIMIT ?",
            [urn, aspect_class.ASPECT_NAME, limit],
        ).fetchall()
        name = aspect_class.ASPECT_NAME
        return [a for (m,) in rows if isinstance(a := self._parsed(urn, name, m), aspect_class)]

    def dataset(self, urn: str) -> DatasetContext | None:
        if not urn.startswith("urn:li:dataset:"):
            return None
        aspects = self._aspects(urn, list(DATASET_ASPECTS))
        if not aspects:
            return None
        return dataset_context(urn, aspects, self.downstreams(urn))

    def _lookup(self, kind: str, value: str) -> list[str]:
        self._refresh_index()
        rows = self._db.execute(
            "SELECT urn FROM reflex_index WHERE kind = ? AND value = ? ORDER BY urn", [kind, value]
        ).fetchall()
        return [row[0] for row in rows]

    def downstreams(self, urn: str) -> list[str]:
        return self._lookup("upstream", urn)

    def datasets_by_domain(self, domain_urn: str) -> list[str]:
        return self._lookup("domain", domain_urn)

    def datasets_by_platform(self, platform: str) -> list[str]:
        return self._lookup("platform", platform.split(":")[-1])

    def datasets_by_field(self, field_name: str) -> list[str]:
        return self._lookup("field", field_name.lower())

    def datasets_by_owner(self, owner_urn: str) -> list[str]:
        return self._lookup("owner", owner_urn)

    def terms_under(self, node_urn: str) -> list[str]:
        rows = self._db.execute(
            "SELECT urn FROM metadata_aspect_v2 WHERE aspect_name = 'glossaryTermInfo'"
            " AND version = 0 AND json_extract(metadata, '$.parentNode') = ? ORDER BY urn",
            [node_urn],
        ).fetchall()
        return [row[0] for row in rows]

    # --- index maintenance ---------------------------------------------------------------------
    def _refresh_index(self) -> None:
        """Index the aspects written since the last refresh (by any process)."""
        (last_rowid,) = self._db.execute("SELECT last_rowid FROM reflex_index_state").fetchone()
        (max_rowid,) = self._db.execute(
            "SELECT coalesce(max(rowid), 0) FROM metadata_aspect_v2"
        ).fetchone()
        if max_rowid <= last_rowid:
            return
        if self._reader:  # catch up in its own copy, under no lock
            self._private_index()
            self._catch_up()
            return
        with self._write_lock():
            self._catch_up()

    def _catch_up(self) -> None:
        (last_rowid,) = self._db.execute("SELECT last_rowid FROM reflex_index_state").fetchone()
        names = list(INDEXED_ASPECTS)
        # NOT INDEXED: walk the rowid range instead of the whole (urn, aspect, version) index.
        changed = self._db.execute(
            "SELECT latest.urn, latest.aspect_name, latest.metadata FROM ("
            " SELECT DISTINCT urn, aspect_name FROM metadata_aspect_v2 NOT INDEXED"
            " WHERE rowid > ? AND version > 0 AND urn LIKE 'urn:li:dataset:%'"
            f" AND aspect_name IN ({','.join('?' * len(names))})) AS cur"
            " JOIN metadata_aspect_v2 AS latest ON latest.urn = cur.urn"
            " AND latest.aspect_name = cur.aspect_name AND latest.version = 0",
            [last_rowid, *names],
        ).fetchall()
        new_urns = self._db.execute(
            "SELECT DISTINCT urn FROM metadata_aspect_v2 NOT INDEXED "
            "WHERE rowid > ? AND urn LIKE 'urn:li:dataset:%'",
            [last_rowid],
        ).fetchall()
        (max_rowid,) = self._db.execute(
            "SELECT coalesce(max(rowid), 0) FROM metadata_aspect_v2"
        ).fetchone()
        rows: list[tuple[str, str, str]] = []
        stale: list[tuple[str, str]] = []
        for urn, aspect_name, metadata in changed:
            kind = INDEXED_ASPECTS[aspect_name]
            stale.append((urn, kind))
            try:
                values = _index_values(kind, json.loads(metadata))
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                logger.warning("not indexing the malformed %s of %s: %s", aspect_name, urn, error)
                continue
            rows += [(kind, value, urn) for value in values]
        for (urn,) in new_urns:
            with contextlib.suppress(Exception):  # a malformed urn is simply not a dataset
                rows.append(("platform", DatasetUrn.from_string(urn).platform.split(":")[-1], urn))
        self._db.executemany("DELETE FROM reflex_index WHERE urn = ? AND kind = ?", stale)
        self._db.executemany("INSERT OR IGNORE INTO reflex_index VALUES (?, ?, ?)", rows)
        self._db.execute("UPDATE reflex_index_state SET last_rowid = ?", [max_rowid])
        self._db.commit()

    # --- writes --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def one_decision(self) -> Iterator[None]:
        """The decision's writes under one lock and in one transaction: all or none, one
        commit (a slice of a rollout publishing 100 datasets was 200 commits)."""
        if getattr(self._deciding, "held", False):
            yield
            return
        with self._write_lock():
            self._deciding.held = True
            try:
                with self._writer().one_transaction():
                    yield
            finally:
                self._deciding.held = False

    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        with self._write_lock():
            self._write(mcps)

    def _write(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        """Write the batch as one transaction: all of it, or (on a failure) none of it."""
        writer = self._writer()
        with writer.one_transaction():
            try:
                writer.write_batch(mcps)
            except _WriteFailed as failed:
                mcp, error = failed.mcp, failed.error
                raise CatalogError(
                    f"cannot write {mcp.aspectName} on {mcp.entityUrn} to {self.path}: {error}"
                ) from error

    def set_structured_properties(
        self, urn: str, values: Mapping[str, Sequence[str | float]], actor: str
    ) -> None:
        # Read and write under one lock: a steward's edit in another process cannot be lost.
        with self._write_lock():
            current = self.get_aspect(urn, StructuredPropertiesClass)
            merged = merge_structured_properties(current, values, actor)
            self._write([acting_as(actor, urn, merged)])

    def add_owner(self, urn: str, owner: str, ownership_type: str, actor: str) -> None:
        with self._write_lock():
            current = self.get_aspect(urn, OwnershipClass) or OwnershipClass(owners=[])
            if any(o.owner == owner and o.type == ownership_type for o in current.owners):
                return
            current.owners.append(OwnerClass(owner=owner, type=ownership_type))
            current.lastModified = AuditStampClass(time=int(time.time() * 1000), actor=actor)
            self._write([acting_as(actor, urn, current)])

    def reindex(self) -> None:
        """Rebuild DataHub Lite's browse index (for ``datahub lite ls``) after a bulk load."""
        with self._write_lock():
            self._writer().reindex()

    def close(self) -> None:
        if self._lite is None:  # a reader's connection
            self._db.close()
        else:
            self._lite.close()
