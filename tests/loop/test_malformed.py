"""Malformed rows in the store are logged and skipped; the events after them are handled."""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import closing

import pytest

from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_DAY, PAYMENTS_INCIDENT
from reflex_actions.demo.run import Demo
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for
from tests.loop.store import incidents_b, land, store_of

LEDGER = dataset_urn("finance.ledger_entries")
NOT_JSON = "urn:li:incident:garbage-not-json"
NOT_AN_INCIDENT = "urn:li:incident:garbage-wrong-shape"


def _insert(demo: Demo, rows: list[tuple[str, str, int, str]]) -> int:
    """Write rows straight into Lite's table, as a broken writer would; returns the last rowid."""
    with closing(sqlite3.connect(store_of(demo.workdir))) as db, db:
        for urn, aspect, version, metadata in rows:
            db.execute(
                "INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, NULL, ?)",
                (urn, aspect, version, metadata, demo.tick()),
            )
        return int(db.execute("SELECT max(rowid) FROM metadata_aspect_v2").fetchone()[0])


def test_malformed_events_are_logged_and_skipped(
    published: Demo, caplog: pytest.LogCaptureFixture
) -> None:
    wrong_shape = json.dumps({"status": {"state": "ACTIVE"}})
    resolved_wrong_shape = json.dumps({"status": {"state": "RESOLVED"}})
    last_bad = _insert(
        published,
        [
            (NOT_JSON, "incidentInfo", 1, '{"type": "OPERATIONAL", "status": '),
            ("not-an-urn", "incidentInfo", 1, "{}"),
            # valid JSON, but not an IncidentInfo: the ACTIVE -> RESOLVED event reaches the
            # handler, which cannot read it
            (NOT_AN_INCIDENT, "incidentInfo", 1, wrong_shape),
            (NOT_AN_INCIDENT, "incidentInfo", 2, resolved_wrong_shape),
        ],
    )
    land(published, LEDGER, None, LANDING_DAY.isoformat())
    with caplog.at_level(logging.WARNING):
        published.react()

    by_source = _messages(caplog, "reflex_actions.source")
    by_action = _messages(caplog, "reflex_actions.action")
    assert NOT_JSON in by_source  # unreadable rows never become events
    assert "not-an-urn" in by_source
    assert NOT_AN_INCIDENT in by_action and "malformed" in by_action  # read, then skipped
    # the feed moved past the bad rows, and the landing after them was handled
    offset = json.loads(
        (store_of(published.workdir).with_name("reflex.db.reflex-offset")).read_text()
    )
    assert offset["offset"] > last_bad and offset["acked"] == []
    assertion = assertion_urn(lesson_urn_for(PAYMENTS_INCIDENT), LEDGER)
    raised = incidents_b(store_of(published.workdir), LEDGER)
    assert list(raised) == [recurrence_incident_urn(assertion, LANDING_DAY.isoformat())]
    # skipped, not dead-lettered: nothing is waiting in the failed-events log
    failed = list((published.workdir / "failed-events").rglob("*.log"))
    assert all(path.stat().st_size == 0 for path in failed)
    # no lesson was drafted from the unreadable resolution
    assert not [r for r in _rows_about(published, "garbage") if r.startswith("urn:li:glossary")]


def _messages(caplog: pytest.LogCaptureFixture, logger: str) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(logger))


def _rows_about(demo: Demo, word: str) -> list[str]:
    with closing(sqlite3.connect(store_of(demo.workdir))) as db:
        rows = db.execute(
            "SELECT DISTINCT urn FROM metadata_aspect_v2 WHERE urn LIKE ?", (f"%{word}%",)
        ).fetchall()
    return [urn for (urn,) in rows]
