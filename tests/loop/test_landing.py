"""Landed data: where a snapshot may be read from, and what a broken snapshot does.

A refused or unreadable snapshot is an ERROR run of the control, never a FAILURE, and never an
incident; the pipeline goes on to the next event.
"""

from __future__ import annotations

import os
from pathlib import Path

from datahub.metadata.schema_classes import AssertionRunEventClass

from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER, PAYMENTS_INCIDENT
from reflex_actions.demo.run import Demo
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for
from tests.conftest import write_snapshot
from tests.loop.store import history, incidents_b, land, store_of

LEDGER_NAME = "finance.ledger_entries"
LEDGER = dataset_urn(LEDGER_NAME)
ASSERTION = assertion_urn(lesson_urn_for(PAYMENTS_INCIDENT), LEDGER)
DUPLICATED = [
    {"transaction_id": "T1", "entry_id": "E1", "amount": 10},
    {"transaction_id": "T1", "entry_id": "E2", "amount": 10},
    {"transaction_id": "T2", "entry_id": "E3", "amount": 5},
]


def _landing(demo: Demo) -> Path:
    return demo.workdir / "snapshots" / LANDING_FOLDER / LEDGER_NAME


def _runs(demo: Demo) -> list[AssertionRunEventClass]:
    return [
        event for _, event in history(store_of(demo.workdir), ASSERTION, AssertionRunEventClass)
    ]


def _results(demo: Demo) -> list[str]:
    return [str(event.result.type) if event.result else "" for event in _runs(demo)]


def _error_message(event: AssertionRunEventClass) -> str:
    assert event.result is not None and event.result.error is not None
    return (event.result.error.properties or {}).get("message", "")


def test_snapshots_outside_the_allowed_roots_are_refused(published: Demo) -> None:
    outside = write_snapshot(published.workdir / "outside" / "dups.parquet", DUPLICATED)
    landing = _landing(published)
    landing.mkdir(parents=True, exist_ok=True)
    traversal = f"{landing}/../../../outside/dups.parquet"
    assert Path(traversal).resolve() == outside.resolve()
    link = landing / "linked.parquet"
    os.symlink(outside, link)

    land(published, LEDGER, outside, "outside")
    land(published, LEDGER, traversal, "traversal")
    land(published, LEDGER, link, "linked")
    # the same rows inside the landing root: the control fails and incident B is raised
    inside = write_snapshot(landing / "inside.parquet", DUPLICATED)
    land(published, LEDGER, inside, "inside")
    published.react()

    runs = _runs(published)
    assert _results(published) == ["ERROR", "ERROR", "ERROR", "FAILURE"]
    for event in runs[:3]:
        assert "outside the allowed roots" in _error_message(event)
    raised = incidents_b(store_of(published.workdir), LEDGER)
    assert list(raised) == [recurrence_incident_urn(ASSERTION, "inside")]


def test_a_corrupt_snapshot_is_an_error_run_and_the_pipeline_goes_on(published: Demo) -> None:
    landing = _landing(published)
    corrupt = landing / "2026-09-30.parquet"
    corrupt.write_bytes(b"PAR1 this is not a parquet file \x00\xff" * 20)
    drifted = write_snapshot(landing / "drifted.parquet", [{"txn_ref": "T1"}, {"txn_ref": "T1"}])

    land(published, LEDGER, corrupt, "corrupt")
    land(published, LEDGER, landing / "missing.parquet", "missing")
    land(published, LEDGER, drifted, "drifted")
    land(published, LEDGER, None, LANDING_DAY.isoformat())  # found through the locator
    published.react()

    runs = _runs(published)
    assert _results(published) == ["ERROR", "ERROR", "ERROR", "FAILURE"]
    assert "cannot read snapshot" in _error_message(runs[0])
    assert "missing.parquet" in _error_message(runs[1])
    assert "txn_ref" in _error_message(runs[2])
    assert runs[3].result is not None and (runs[3].result.unexpectedCount or 0) > 0
    raised = incidents_b(store_of(published.workdir), LEDGER)
    assert list(raised) == [recurrence_incident_urn(ASSERTION, LANDING_DAY.isoformat())]
