"""Shared helpers for the lesson tests: demo names, store copies and the Lite change feed."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.handlers.change import AspectChange, position_in
from reflex_actions.source.lite_change_feed import LiteChangeFeedSource
from reflex_actions.times import now_ms

PAYMENTS = dataset_urn("finance.payments")
LEDGER = dataset_urn("finance.ledger_entries")
INVOICE_LINES = dataset_urn("finance.invoice_lines")
ALICE, BOB, MARIA = user_urn("alice"), user_urn("bob"), user_urn("maria")
FEED_CONTEXT = PipelineContext(pipeline_name="t", graph=None)


def copy_store(source: Path, target: Path) -> Path:
    """A private copy of a closed Lite store (and its WAL, should one be left)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + "-wal"))
    return target


def store_rows(store: Path) -> list[tuple[Any, ...]]:
    """Every row of ``metadata_aspect_v2`` (with its rowid), read through a separate connection."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        return db.execute("SELECT rowid, * FROM metadata_aspect_v2 ORDER BY rowid").fetchall()


class ChangeFeed:
    """The real ``reflex-lite`` change feed of one store, from its creation on.

    Each ``changes()`` drains the feed as the pipeline does (every event acked) and returns the
    events as the action would read them.
    """

    def __init__(self, store: Path, offset_file: Path) -> None:
        self._config = {
            "store": str(store),
            "offset_file": str(offset_file),
            "start_from": "latest",
            "stop_when_idle": True,
            "poll_interval_seconds": 0.01,
        }
        assert self.changes() == []  # pins the start: only later writes are delivered

    def changes(self) -> list[AspectChange]:
        source = LiteChangeFeedSource.create(dict(self._config), FEED_CONTEXT)
        changes: list[AspectChange] = []
        try:
            for envelope in source.events():
                changes.append(
                    AspectChange.from_mcl(
                        envelope.event, now_ms=now_ms(), position=position_in(envelope.meta)
                    )
                )
                source.ack(envelope)
        finally:
            source.close()
        return changes

    def only_change(self) -> AspectChange:
        """The one event written since the last drain."""
        changes = self.changes()
        assert len(changes) == 1, [(c.urn, c.aspect_name, c.actor) for c in changes]
        return changes[0]
