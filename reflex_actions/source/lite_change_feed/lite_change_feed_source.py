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

One live source per offset file: a second would deliver every event again and overwrite the first
one's offset, so it is refused (see ``_OffsetFileLock``). The feed reads through a query-only
connection: it never writes to the store, and needs no part of Reflex's write lock.
"""

from __future__ import annotations

import fcntl
import glob
import json
import logging
import os
import sqlite3
import tempfile
import threading
from collections import deque
from collections.abc import Iterable
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

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

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.lite import connect_store
from reflex_actions.errors import ReflexError
from reflex_actions.safe_files import open_lock_file
from reflex_actions.source.schedule_tick import tick_envelope
from reflex_actions.times import now_ms

logger = logging.getLogger(__name__)

#: The actor of a write whose system metadata names none: DataHub's default user.
DEFAULT_ACTOR = "urn:li:corpuser:datahub"

# The rows the feed delivers: the versioned ones (version 0 is Lite's mirror of the latest).
_DELIVERED = "cur.version > 0"

# Each versioned row with the row of the version before it (none for version 1: version 0 is
# Lite's mirror of the latest, not a predecessor).
_ROWS_AFTER = (
    "SELECT cur.rowid, cur.urn, cur.aspect_name, cur.metadata, cur.system_metadata,"
    " cur.createdon, prev.metadata, prev.system_metadata"
    " FROM metadata_aspect_v2 AS cur LEFT JOIN metadata_aspect_v2 AS prev"
    " ON prev.urn = cur.urn AND prev.aspect_name = cur.aspect_name"
    " AND prev.version = cur.version - 1 AND prev.version > 0"
    f" WHERE cur.rowid > ? AND {_DELIVERED} ORDER BY cur.rowid LIMIT ?"
)

# The newest row the feed delivers, and how many of those it has still to deliver: above the
# offset (first parameter) and not acked (the second, a JSON list of rowids).
_BACKLOG = (
    "SELECT coalesce(max(cur.rowid), 0), count(*) FILTER (WHERE cur.rowid > ?"
    " AND cur.rowid NOT IN (SELECT value FROM json_each(?)))"
    f" FROM metadata_aspect_v2 AS cur WHERE {_DELIVERED}"
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
    tick_interval_seconds: float | None = Field(
        default=None,
        gt=0,
        description="When idle, yield a schedule tick (ReflexScheduleTick_v1) at most this "
        "often, so the action judges what is due (stale data sends no event). Unset: none.",
    )
    stop_when_idle: bool = Field(
        default=False,
        description="Finish events() once caught up and every event is acked (demo, tests).",
    )

    @property
    def offset_path(self) -> Path:
        """Where the delivered offset is kept: offset_file, else beside the store."""
        return Path(self.offset_file or f"{self.store}.reflex-offset")


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
            offset, acked = _parse_state(path.read_bytes())
        except OSError as error:
            problem = error.strerror or type(error).__name__
        except ValueError as error:
            problem = str(error)
        else:
            return cls(path, offset, acked)
        raise ChangeFeedError(
            f"unreadable offset file {path}: {problem}; "
            "delete it to read the store again from start_from"
        )

    @staticmethod
    def remove_abandoned_temp_files(path: Path) -> None:
        """Delete temp files a writer killed mid-save left behind; only the lock holder may."""
        pattern = glob.escape(_temp_prefix(path)) + "*" + _TEMP_SUFFIX
        for abandoned in path.parent.glob(pattern):
            abandoned.unlink(missing_ok=True)

    @property
    def position(self) -> int:
        return self._read_to

    @property
    def offset(self) -> int:
        """Every row up to here is delivered."""
        return self._offset

    @property
    def acked(self) -> frozenset[int]:
        """Rows above the offset delivered out of order."""
        return frozenset(self._acked)

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
        """Replace the offset file atomically: readers and crashes see the old state or the new.

        The state goes to a temp file of its own (a fixed name would be shared with any other
        writer, whose open truncates it and whose rename moves it away), synced before the
        rename so the name never points at unwritten data. The folder is not synced: a rename
        lost to a power cut leaves the previous offset, which replays acked events but loses none.
        """
        fd, temp = tempfile.mkstemp(
            prefix=_temp_prefix(self._path), suffix=_TEMP_SUFFIX, dir=self._path.parent
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"offset": self._offset, "acked": sorted(self._acked)}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self._path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


#: How the offset file's temp files end; they start with ``_temp_prefix`` (see _Offsets.save).
_TEMP_SUFFIX = ".tmp"


def _temp_prefix(offset_file: Path) -> str:
    """Hidden, beside the offset file, named after it: no other file's temp files match."""
    return f".{offset_file.name}."


def _parse_state(raw: bytes) -> tuple[int, set[int]]:
    """The offset and acked rows an offset file holds; ValueError saying what is wrong if not."""
    if not raw.strip():
        raise ValueError("it is empty")
    try:
        state = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"it is not JSON (line {error.lineno} column {error.colno})") from None
    if not isinstance(state, dict):
        raise ValueError("it is not a JSON object")
    offset, acked = state.get("offset"), state.get("acked")
    if not _is_rowid(offset):
        raise ValueError("'offset' must be a Lite rowid (an integer >= 0)")
    if not isinstance(acked, list) or not all(_is_rowid(r) and r > offset for r in acked):
        raise ValueError("'acked' must be a list of Lite rowids above 'offset'")
    return offset, set(acked)


def _is_rowid(value: object) -> bool:
    return type(value) is int and value >= 0  # bool is an int subclass, and no rowid


class _OffsetFileLock:
    """An exclusive claim on one offset file, held for a source's lifetime.

    ``flock`` on ``<offset file>.lock``: its lock belongs to the open file, so a second source
    in the same process is refused as well as one in another process (POSIX record locks are
    per process and would let the first case through), and the kernel drops it when the holder
    exits, ``kill -9`` included, so a crash leaves no stale lock. The file stays on disk: removing
    it would let the next source lock a new file while an old holder still has the old one. It
    names the holder's process id for the refusal message.
    """

    def __init__(self, offset_file: Path) -> None:
        self.offset_file = offset_file
        self.path = self.path_of(offset_file)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open_lock_file(self.path)
        except OSError as error:
            raise self._cannot_lock(error) from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            refusal = (
                self._in_use(handle)
                if isinstance(error, BlockingIOError)
                else self._cannot_lock(error)
            )
            handle.close()
            raise refusal from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle

    @staticmethod
    def path_of(offset_file: Path) -> Path:
        return offset_file.with_name(offset_file.name + ".lock")

    @classmethod
    def holder(cls, offset_file: Path) -> str | None:
        """Whether a live source holds the lock now: its process id ("" if it has not written
        it yet), None if none does. Probes with a shared lock taken and dropped at once: a
        source starting in that instant is refused, as by any holder."""
        try:
            handle = cls.path_of(offset_file).open(encoding="ascii", errors="replace")
        except FileNotFoundError:
            return None  # no source ever ran on this offset file
        except OSError as error:
            raise ChangeFeedError(
                f"cannot read the lock of offset file {offset_file}: {error.strerror}"
            ) from None
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _pid_in(handle)
            return None

    def _in_use(self, handle: TextIO) -> ChangeFeedError:
        holder = _pid_in(handle)
        process = f" (process {holder})" if holder else ""
        return ChangeFeedError(
            f"offset file {self.offset_file} is in use by another reflex-lite source{process}, "
            f"which holds {self.path}; a second source would deliver every event again. "
            "Stop the other pipeline, or give this source its own offset_file"
        )

    def _cannot_lock(self, error: OSError) -> ChangeFeedError:
        return ChangeFeedError(
            f"cannot lock offset file {self.offset_file} through {self.path}: {error.strerror}"
        )

    def release(self) -> None:
        self._handle.close()


def _pid_in(lock: TextIO) -> str:
    """The process id a lock holder wrote in its lock file; "" while it is still writing it."""
    lock.seek(0)
    holder = lock.read(20).strip()
    return holder if holder.isascii() and holder.isdigit() else ""


def _connect(store: str) -> sqlite3.Connection:
    """The store, read only (the catalog's refusals of what is no store, as ChangeFeedError)."""
    try:
        db = connect_store(store, isolation_level=None)
    except CatalogError as error:
        raise ChangeFeedError(str(error)) from None
    db.execute("PRAGMA query_only = ON")
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


def _persisted_or_pinned(
    db: sqlite3.Connection, config: LiteChangeFeedConfig, offset_file: Path
) -> tuple[_Offsets, bool]:
    """The persisted offsets (and False), or new ones pinned at start_from (and True: not
    saved yet)."""
    offsets = _Offsets.load(offset_file)
    (end,) = db.execute("SELECT coalesce(max(rowid), 0) FROM metadata_aspect_v2").fetchone()
    if offsets is None:
        return _Offsets(offset_file, 0 if config.start_from == "beginning" else end, set()), True
    if offsets.position > end:
        # Rowids restart in a new store: the feed would wait, silently, for rows it has seen.
        raise ChangeFeedError(
            f"offset file {offset_file} is past the end of {config.store}; was the store "
            "recreated? Delete the offset file to read the store from start_from"
        )
    return offsets, False


@dataclass(frozen=True)
class FeedStatus:
    """How far a reflex-lite source stands behind its store."""

    store: Path
    offset_file: Path
    #: the newest row the feed delivers (0: none yet)
    newest_row: int
    #: every row up to here is delivered
    offset: int
    #: rows above the offset delivered out of order
    acked: int
    #: rows the feed has still to deliver
    behind: int
    #: the process id of the source running on this offset file ("" if it has not written it
    #: yet), None if none runs
    running: str | None


def feed_status(config: LiteChangeFeedConfig) -> FeedStatus:
    """Where the source ``config`` describes stands, read without moving it: it writes no file,
    and takes the offset file's lock only for an instant (see ``_OffsetFileLock.holder``).
    ChangeFeedError where the source itself would refuse to start."""
    offset_file = config.offset_path
    with closing(_connect(config.store)) as db:
        db.execute("BEGIN")  # one snapshot of the store for the offset check and the counts
        offsets, _ = _persisted_or_pinned(db, config, offset_file)
        newest_row, behind = db.execute(
            _BACKLOG, [offsets.offset, json.dumps(sorted(offsets.acked))]
        ).fetchone()
    return FeedStatus(
        store=Path(config.store),
        offset_file=offset_file,
        newest_row=newest_row,
        offset=offsets.offset,
        acked=len(offsets.acked),
        behind=behind,
        running=_OffsetFileLock.holder(offset_file),
    )


class LiteChangeFeedSource(EventSource):
    """Event source ``reflex-lite``: MetadataChangeLogEvent_v1 envelopes from a Lite store."""

    def __init__(self, config: LiteChangeFeedConfig) -> None:
        self.config = config
        offset_file = config.offset_path
        self._db = _connect(config.store)  # first: a wrong store path leaves no files
        with ExitStack() as undo:  # a source that fails to start lets go of what it took
            undo.callback(self._db.close)
            self._lock = _OffsetFileLock(offset_file)
            undo.callback(self._lock.release)
            _Offsets.remove_abandoned_temp_files(offset_file)
            self._offsets = self._resume(offset_file)
            undo.pop_all()
        self._wake = threading.Event()
        self._last_tick_ms: int | None = None

    #: This source, not a timer in the action, drives the schedule (with
    #: ``tick_interval_seconds``; without it the embedded runtime judges nothing on a schedule).
    sends_schedule_ticks = True

    def _resume(self, offset_file: Path) -> _Offsets:
        """The persisted offsets, or new ones pinned at start_from."""
        offsets, pinned = _persisted_or_pinned(self._db, self.config, offset_file)
        if pinned:
            # Pin the start now: a restart before the first ack must not move "latest" forward.
            offsets.save()
        return offsets

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
                if self._tick_due():
                    yield tick_envelope(self._last_tick_ms)
                    continue  # what the tick wrote is read before going idle
                if self.config.stop_when_idle and self._offsets.idle:
                    return
                self._wake.wait(self.config.poll_interval_seconds)

    def _tick_due(self) -> bool:
        """Whether an idle feed owes the action a schedule tick now (and note it sent one)."""
        interval = self.config.tick_interval_seconds
        now = now_ms()
        if interval is None or (
            self._last_tick_ms is not None and now - self._last_tick_ms < interval * 1000
        ):
            return False
        self._last_tick_ms = now
        return True

    def ack(self, event: EventEnvelope, processed: bool = True) -> None:
        """Count the event as delivered, processed or not (see the module docstring); a
        schedule tick is no row of the store."""
        if "lite" in event.meta:
            self._offsets.ack(event.meta["lite"]["rowid"])

    def request_stop(self) -> None:
        super().request_stop()
        self._wake.set()

    def close(self) -> None:
        self.request_stop()
        self._db.close()
        self._lock.release()
