"""Writers' clocks order nothing (DESIGN §9): Reflex orders decisions by the event log and
judges by its own clock, so a time stamped in the future by a skewed or forged writer freezes
no gate and blinds no dataset."""

from __future__ import annotations

from datahub.metadata.schema_classes import (
    AssertionResultClass,
    AssertionResultTypeClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
)

from reflex_actions.catalog.steward import acting_as, merge_structured_properties
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_FOLDER, PAYMENTS_INCIDENT
from reflex_actions.demo.run import INTRUDER, STEWARD, Demo
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.times import parse_instant
from reflex_actions.vocabulary import APPROVAL
from tests.conftest import write_snapshot
from tests.loop.store import history, incidents_b, store_of, stored_lesson

PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
#: a writer's clock far ahead of anyone's
YEAR_2100 = parse_instant("2100-01-01T00:00Z")


def _stamped(demo: Demo, actor: str, values: dict[str, list[str]], time_ms: int) -> None:
    """``actor`` edits the lesson's properties with its write stamped ``time_ms``
    (``systemMetadata.lastObserved``, which the embedded store records as the event's time)."""
    current = demo.catalog.get_aspect(PAYMENTS_LESSON, StructuredPropertiesClass)
    mcp = acting_as(actor, PAYMENTS_LESSON, merge_structured_properties(current, values, actor))
    assert mcp.systemMetadata is not None
    mcp.systemMetadata.lastObserved = time_ms
    demo.catalog.emit([mcp])
    demo.react()


def test_a_refused_approval_stamped_in_2100_does_not_freeze_the_gate(pending: Demo) -> None:
    _stamped(pending, INTRUDER, {APPROVAL: ["APPROVED"]}, YEAR_2100)
    lesson = stored_lesson(store_of(pending.workdir), PAYMENTS_LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL
    refusal = lesson.decisions[-1]
    assert refusal.decision == "approval refused" and refusal.at < YEAR_2100  # taken as now

    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED", actor=STEWARD)

    lesson = stored_lesson(store_of(pending.workdir), PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED
    assert lesson.in_force_since is not None and lesson.in_force_since < YEAR_2100


LEDGER_NAME = "finance.ledger_entries"
LEDGER = dataset_urn(LEDGER_NAME)
ASSERTION = assertion_urn(PAYMENTS_LESSON, LEDGER)
DUPLICATED = [
    {"transaction_id": "T1", "entry_id": "E1", "amount": 10},
    {"transaction_id": "T1", "entry_id": "E2", "amount": 10},
]
CLEAN = [{"transaction_id": "T1", "entry_id": "E1", "amount": 10}]


def _land_at(demo: Demo, rows: list[dict[str, object]], snapshot_id: str, at: int) -> None:
    """A loader lands ``rows`` and reports it with its own clock's ``at``."""
    snapshot = write_snapshot(
        demo.workdir / "snapshots" / LANDING_FOLDER / LEDGER_NAME / f"{snapshot_id}.parquet", rows
    )
    operation = OperationClass(
        timestampMillis=at,
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": snapshot_id},
        lastUpdatedTimestamp=at,
    )
    demo.catalog.emit([acting_as(DEFAULT_ACTOR, LEDGER, operation)])
    demo.react()


def test_an_operation_stamped_in_2100_does_not_blind_the_dataset(published: Demo) -> None:
    """A loader whose clock is a century fast: its landing is judged (dated now), and so is
    every landing after it."""
    _land_at(published, CLEAN, "skewed", YEAR_2100)
    _land_at(published, DUPLICATED, "next", published.tick())

    runs = [
        run for _, run in history(store_of(published.workdir), ASSERTION, AssertionRunEventClass)
    ]
    assert [(r.runId, str(r.result.type)) for r in runs if r.result] == [
        ("skewed", "SUCCESS"),
        ("next", "FAILURE"),
    ]
    assert all(r.timestampMillis < YEAR_2100 for r in runs)
    assert list(incidents_b(store_of(published.workdir), LEDGER)) == [
        recurrence_incident_urn(ASSERTION, "next")
    ]


def test_a_run_event_someone_else_wrote_on_reflexs_assertion_is_ignored(published: Demo) -> None:
    """A forged SUCCESS of the snapshot about to land, dated 2100: Reflex judges the landing
    anyway and raises incident B."""
    forged = AssertionRunEventClass(
        timestampMillis=YEAR_2100,
        runId="2026-09-30",
        asserteeUrn=LEDGER,
        assertionUrn=ASSERTION,
        status=AssertionRunStatusClass.COMPLETE,
        result=AssertionResultClass(type=AssertionResultTypeClass.SUCCESS),
    )
    published.catalog.emit([acting_as(INTRUDER, ASSERTION, forged)])

    _land_at(published, DUPLICATED, "2026-09-30", published.tick())

    assert list(incidents_b(store_of(published.workdir), LEDGER)) == [
        recurrence_incident_urn(ASSERTION, "2026-09-30")
    ]
