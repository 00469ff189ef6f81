"""Writers' clocks order nothing (DESIGN §9): Reflex orders decisions by the event log and
judges by its own clock, so a time stamped in the future by a skewed or forged writer freezes
no gate and blinds no dataset."""

from __future__ import annotations

from datahub.metadata.schema_classes import StructuredPropertiesClass

from reflex_actions.catalog.steward import acting_as, merge_structured_properties
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import INTRUDER, STEWARD, Demo
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.times import parse_instant
from reflex_actions.vocabulary import APPROVAL
from tests.loop.store import store_of, stored_lesson

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
