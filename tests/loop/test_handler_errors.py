"""Every failure inside a handler is a ReflexError that leaves the lesson in a state that says
why on its page, never an escaping assert, ValueError or NotImplementedError."""

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
def test_a_lesson_that_cannot_be_backtested_goes_back_to_proposed_saying_why(
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
    assert lesson.state is LessonState.PROPOSED
    assert property_values(store, lesson_urn, ROOT_CAUSE_STATUS) == ["PROPOSED"]
    assert lesson.validation_error is not None and reason in lesson.validation_error
    page = latest(store, lesson_urn, GlossaryTermInfoClass)
    assert page is not None and reason in page.definition


def test_a_control_that_cannot_rename_fields_says_so_as_a_reflex_error() -> None:
    ownership = parse_control_spec({"type": "active_ownership"})
    with pytest.raises(ReflexError, match="cannot rename fields"):
        ownership.with_dataset_fields({"owner_urn": "owner"})
