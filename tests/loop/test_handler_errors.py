"""Every failure inside a handler is a ReflexError that leaves the lesson in a state that says
why on its page (ERROR, with the reason), never an escaping assert, ValueError or
NotImplementedError."""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    GlossaryTermInfoClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
)

from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.controls import parse_control_spec
from reflex_actions.demo.run import STEWARD, Demo
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE_STATUS
from tests.loop.store import latest, property_values, store_of, stored_lesson

INCIDENT = "urn:li:incident:no-such-place"
UNKNOWN_DATASET = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.public.gone,PROD)"


@pytest.mark.parametrize(
    ("entities", "reason"),
    [([], "names no dataset"), ([UNKNOWN_DATASET], "is not in the catalog")],
    ids=["no-dataset", "unknown-dataset"],
)
def test_a_lesson_that_cannot_be_backtested_is_in_error_saying_why(
    drafted: Demo, entities: list[str], reason: str
) -> None:
    stamp = AuditStampClass(drafted.tick(), STEWARD)
    info = IncidentInfoClass(
        type=IncidentTypeClass.OPERATIONAL,
        title="Duplicate rows again",
        description="The loader retried and inserted duplicate rows.",
        entities=entities,
        status=IncidentStatusClass(state=IncidentStateClass.ACTIVE, lastUpdated=stamp),
        created=stamp,
    )
    drafted.catalog.emit([acting_as(STEWARD, INCIDENT, info)])
    drafted.react()
    resolve_incident(drafted.catalog, INCIDENT, "Made the loader idempotent.", STEWARD)
    drafted.react()
    lesson_urn = lesson_urn_for(INCIDENT)
    drafted.catalog.set_structured_properties(
        lesson_urn,
        {ROOT_CAUSE_STATUS: ["CONFIRMED"], CONTROL_SPEC: ["{type: uniqueness, field: order_id}"]},
        STEWARD,
    )
    drafted.react()

    store = store_of(drafted.workdir)
    lesson = stored_lesson(store, lesson_urn)
    assert lesson.state is LessonState.ERROR
    assert lesson.error is not None and reason in lesson.error
    page = latest(store, lesson_urn, GlossaryTermInfoClass)
    assert page is not None and "Reflex could not go on" in page.definition
    assert reason in page.definition
    # the status is back to Reflex's PROPOSED, so confirming again is a decision: it retries
    assert property_values(store, lesson_urn, ROOT_CAUSE_STATUS) == ["PROPOSED"]
    drafted.steward_sets(lesson_urn, ROOT_CAUSE_STATUS, "CONFIRMED")
    retried = stored_lesson(store, lesson_urn)
    assert [d.decision for d in retried.decisions].count("confirmation refused") == 2
    assert retried.state is LessonState.ERROR


def test_a_control_that_cannot_rename_fields_says_so_as_a_reflex_error() -> None:
    ownership = parse_control_spec({"type": "active_ownership"})
    with pytest.raises(ReflexError, match="cannot rename fields"):
        ownership.with_dataset_fields({"owner_urn": "owner"})
