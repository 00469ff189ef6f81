"""DataHub Lite's aspect history as a stream of the MetadataChangeLog events GMS would publish.

GMS announces every aspect change on Kafka; DataHub Lite only records it, as a new versioned row in
``metadata_aspect_v2`` (identical rewrites add no row). This source tails those rows in rowid
order and turns each into the ``MetadataChangeLogEvent_v1`` envelope the kafka source would yield
for the same change, so the Reflex action and its handlers run unchanged on the embedded store.

Fidelity to GMS:

* ``aspect`` / ``previousAspectValue`` carry the stored JSON as ``bytes``: the MCL Avro schema
  types ``GenericAspect.value`` as bytes, and that is what the kafka source hands to actions.
  ``json.loads`` reads both; ``as_json()`` renders both as a string.
* Timeseries aspects (``operation``, ``assertionRunEvent``) have no previous value, as on GMS,
  even though Lite versions them like any other aspect.
* ``created.actor`` is ``systemMetadata.properties["actor"]`` (set by Reflex's steward
  commands), else ``urn:li:corpuser:datahub``, DataHub's default user.

Delivery is at-least-once. The offset file holds the highest rowid R such that every row up to R
was delivered, plus the rows above R acked out of order, so a restart replays no acked event and
loses no unacked one. ``ack(processed=False)`` counts as delivered: the pipeline passes it when
the action declined the event, and on Kafka the next commit moves past such a message too;
holding the offset back for it would stall the feed on one event. A row that cannot be turned
into an event (malformed JSON, unparsable urn) is logged and counts as delivered.

One source per offset file. The feed reads through a query-only connection: it never writes to
the store, and needs no part of Reflex's write lock.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from datahub.configuration import ConfigModel
from datahub.emitter.aspect import JSON_CONTENT_TYPE, TIMESERIES_ASPECT_MAP
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeLogClass,
    SystemMetadataClass,
)
from datahub.utilities.urns.urn import Urn
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)
from datahub_actions.pipeline.pipeline_context import PipelineContext
from datahub_actions.source.event_source import EventSource
from pydantic import Field

from reflex_actions.errors import ReflexError

logger = logging.getLogger(__name__)

#: The actor of a write whose system metadata names none: DataHub's default user.
DEFAULT_ACTOR = "urn:li:corpuser:datahub"

# Each versioned row with the row of the version before it (none for version 1: version 0 is
# Lite's mirror of the latest, not a predecessor).
_ROWS_AFTER = (
    "SELECT cur.rowid, cur.urn, cur.aspect_name, cur.metadata, cur.system_metadata,"
    " cur.createdon, prev.metadata, prev.system_metadata"
    " FROM metadata_aspect_v2 AS cur LEFT JOIN metadata_aspect_v2 AS prev"
    " ON prev.urn = cur.urn AND prev.aspect_name = cur.aspect_name"
    " AND prev.version = cur.version - 1 AND prev.version > 0"
    " WHERE cur.rowid > ? AND cur.version > 0 ORDER BY cur.rowid LIMIT ?"
)


class ChangeFeedError(ReflexError):
    """The change feed cannot start: no Lite store there, or an offset file that does not fit it."""


class LiteChangeFeedConfig(ConfigModel):
    store: str = Field(description="Path to the DataHub Lite SQLite file to tail.")
    offset_file: str | None = Field(
        default=None, description="Where the delivered offset is kept; <store>.reflex-offset."
    )
    poll_interval_seconds: float = Field(default=0.2, gt=0)
    batch_size: int = Field(default=500, ge=1)
    start_from: Literal["beginning", "latest"] = Field(
        default="beginning", description="Where to start when no offset has been persisted."
    )
    stop_when_idle: bool = Field(
        default=False,
        description="Finish events() once caught up and every event is acked (demo, tests).",
    )


class _Offsets:
    """Which rows are delivered, persisted after every change so a restart resumes exactly."""

    def __init__(self, path: Path, offset: int, acked: set[int]) -> None:
        self._path = path
        self._offset = offset  # every row <= offset is delivered
        self._acked = acked  # rows > offset acked out of order (some maybe not yet re-read)
        self._read_to = offset  # the feed has taken every row up to here
        self._inflight: deque[int] = deque()  # rows taken and not yet below the offset
        self._lock = threading.Lock()  # acks may come from another thread than events()

    @classmethod
    def load(cls, path: Path) -> _Offsets | None:
        if not path.exists():
            return None
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            return cls(path, int(state["offset"]), {int(rowid) for rowid in state["acked"]})
        except (ValueError, KeyError, TypeError) as error:
            raise ChangeFeedError(
                f"unreadable offset file {path}: {error!r}; delete it to start from start_from"
            ) from None

    @property
    def position(self) -> int:
        return self._read_to

    @property
    def idle(self) -> bool:
        """Nothing taken is still waiting for its ack (nor for its ack to be persisted)."""
        with self._lock:
            return not self._inflight

    def take(self, rowid: int) -> bool:
        """Note that the feed read ``rowid``; False if it was acked before a restart."""
        with self._lock:
            self._inflight.append(rowid)
            self._read_to = rowid
            if rowid not in self._acked:
                return True
            self._commit()
            return False

    def ack(self, rowid: int) -> None:
        with self._lock:
            if rowid > self._read_to:
                raise ValueError(f"Lite row {rowid} was never delivered by this change feed")
            if rowid <= self._offset or rowid in self._acked:
                return
            self._acked.add(rowid)
            self._commit()

    def _commit(self) -> None:
        while self._inflight and self._inflight[0] in self._acked:
            self._inflight.popleft()
        self._offset = self._inflight[0] - 1 if self._inflight else self._read_to
        self._acked = {rowid for rowid in self._acked if rowid > self._offset}
        self.save()

    def save(self) -> None:
        """Replace the offset file atomically: a crash leaves the old state or the new one."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_name(self._path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump({"offset": self._offset, "acked": sorted(self._acked)}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._path)


def _connect(store: Path) -> sqlite3.Connection:
    if not store.is_file():
        raise ChangeFeedError(f"DataHub Lite store {store} does not exist")
    # The pipeline builds the source on one thread and iterates events() on its worker thread.
    db = sqlite3.connect(store, timeout=10, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA query_only = ON")
        table = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'metadata_aspect_v2'"
        ).fetchone()
    except sqlite3.DatabaseError as error:
        db.close()
        raise ChangeFeedError(f"cannot read {store} as SQLite: {error}") from None
    if table is None:
        db.close()
        raise ChangeFeedError(f"{store} is not a DataHub Lite store (no metadata_aspect_v2)")
    return db


def _generic_aspect(metadata: str) -> GenericAspectClass:
    if not isinstance(json.loads(metadata), dict):
        raise ValueError("the aspect is not a JSON object")
    return GenericAspectClass(value=metadata.encode("utf-8"), contentType=JSON_CONTENT_TYPE)


def _system_metadata(system_metadata: str | None) -> SystemMetadataClass | None:
    return SystemMetadataClass.from_obj(json.loads(system_metadata)) if system_metadata else None


def _envelope(row: tuple[Any, ...]) -> EventEnvelope:
    """The envelope the kafka source would yield for the MCL GMS publishes for this row."""
    rowid, urn, aspect_name, metadata, system_json, created_on, prev_metadata, prev_system = row
    system = _system_metadata(system_json)
    actor = ((system.properties if system else None) or {}).get("actor", DEFAULT_ACTOR)
    mcl = MetadataChangeLogClass(
        entityType=Urn.from_string(urn).entity_type,
        entityUrn=urn,
        changeType=ChangeTypeClass.UPSERT,
        aspectName=aspect_name,
        aspect=_generic_aspect(metadata),
        systemMetadata=system,
        created=AuditStampClass(time=created_on, actor=actor),
    )
    if prev_metadata is not None and aspect_name not in TIMESERIES_ASPECT_MAP:
        mcl.previousAspectValue = _generic_aspect(prev_metadata)
        mcl.previousSystemMetadata = _system_metadata(prev_system)
    return EventEnvelope(
        METADATA_CHANGE_LOG_EVENT_V1_TYPE,
        MetadataChangeLogEvent.from_class(mcl),
        {"lite": {"rowid": rowid}},
    )


class LiteChangeFeedSource(EventSource):
    """Event source ``reflex-lite``: MetadataChangeLogEvent_v1 envelopes from a Lite store."""

    def __init__(self, config: LiteChangeFeedConfig) -> None:
        self.config = config
        offset_file = Path(config.offset_file or f"{config.store}.reflex-offset")
        offsets = _Offsets.load(offset_file)
        self._db = _connect(Path(config.store))
        (end,) = self._db.execute(
            "SELECT coalesce(max(rowid), 0) FROM metadata_aspect_v2"
        ).fetchone()
        if offsets is None:
            # Pin the start now: a restart before the first ack must not move "latest" forward.
            offsets = _Offsets(offset_file, 0 if config.start_from == "beginning" else end, set())
            offsets.save()
        elif offsets.position > end:
            # Rowids restart in a new store: the feed would wait, silently, for rows it has seen.
            self._db.close()
            raise ChangeFeedError(
                f"offset file {offset_file} is past the end of {config.store}; was the store "
                "recreated? Delete the offset file to read the store from start_from"
            )
        self._offsets = offsets
        self._wake = threading.Event()

    @classmethod
    def create(cls, config_dict: dict, ctx: PipelineContext) -> LiteChangeFeedSource:
        return cls(LiteChangeFeedConfig.model_validate(config_dict))

    def events(self) -> Iterable[EventEnvelope]:
        while not self.stop_requested():
            rows = self._db.execute(
                _ROWS_AFTER, [self._offsets.position, self.config.batch_size]
            ).fetchall()
            for row in rows:
                if self.stop_requested():
                    return
                rowid = row[0]
                if not self._offsets.take(rowid):
                    continue
                try:
                    envelope = _envelope(row)
                except Exception as error:  # one bad row must not stop the feed
                    logger.warning(
                        "skipping Lite row %s (%s, aspect %s): %s", rowid, row[1], row[2], error
                    )
                    self._offsets.ack(rowid)
                    continue
                yield envelope
            if not rows:
                if self.config.stop_when_idle and self._offsets.idle:
                    return
                self._wake.wait(self.config.poll_interval_seconds)

    def ack(self, event: EventEnvelope, processed: bool = True) -> None:
        """Count the event as delivered, processed or not (see the module docstring)."""
        self._offsets.ack(event.meta["lite"]["rowid"])

    def request_stop(self) -> None:
        super().request_stop()
        self._wake.set()

    def close(self) -> None:
        self.request_stop()
        self._db.close()
