"""Incident resolution decisions (``on_incident_change``): a resolved incident A drafts a lesson,
a resolved incident B (one Reflex raised) is noted on the lesson that raised it, and a
redelivered resolution decides nothing."""

from __future__ import annotations

from datahub.metadata.schema_classes import (
    AuditStampClass,
    GlossaryTermInfoClass,
    IncidentInfoClass,
    IncidentSourceClass,
    IncidentSourceTypeClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
)

from reflex_actions.handlers.assertions import RECURRENCE_TYPE, assertion_urn
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import decide_and_apply
from reflex_actions.handlers.directives import Emit, SaveLesson, SetProperties, apply
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.lesson_store import (
    LESSON_PROPERTY,
    lesson_urn_for,
    load_lesson,
    structured_values,
)
from reflex_actions.lessons.model import Lesson, LessonState, Recurrence, RecurrenceResolution
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE, ROOT_CAUSE_STATUS
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    LESSON,
    PAYMENTS,
    SPEC,
    STEWARD,
    add_dataset,
    change,
    context,
    kinds,
    published_lesson,
)

INCIDENT_A = "urn:li:incident:payments-dup"
INCIDENT_B = "urn:li:incident:reflex-b"
DRAFTED = lesson_urn_for(INCIDENT_A)


def incident(
    state: str, custom_type: str | None = None, source: str | None = None
) -> IncidentInfoClass:
    stamp = AuditStampClass(time=1, actor=STEWARD)
    return IncidentInfoClass(
        type=IncidentTypeClass.CUSTOM if custom_type else IncidentTypeClass.OPERATIONAL,
        customType=custom_type,
        title="Duplicate payments",
        description="A retry re-inserted the same transactions: duplicate rows in payments.",
        entities=[PAYMENTS],
        status=IncidentStatusClass(state=state, message="deduplicated", lastUpdated=stamp),
        source=IncidentSourceClass(type=IncidentSourceTypeClass.ASSERTION_FAILURE, sourceUrn=source)
        if source
        else None,
        created=stamp,
    )


def resolution(urn: str = INCIDENT_A, **kind: str) -> AspectChange:
    return change(
        urn,
        incident(IncidentStateClass.RESOLVED, **kind),
        incident(IncidentStateClass.ACTIVE, **kind),
        time_ms=20,
    )


def lesson_on(info: GlossaryTermInfoClass) -> Lesson:
    """The lesson a term info holds (what the applier will store)."""
    return Lesson.model_validate_json((info.customProperties or {})[LESSON_PROPERTY])


def test_a_resolved_incident_decides_the_workflow_properties_then_the_lesson_term() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS, key=True)
    ctx = context(catalog)

    on_incident_change(resolution(), ctx)

    assert catalog.writes == []
    assert kinds(ctx.out.directives) == ["SetProperties", "Emit"]  # the term info last
    drafted, term = ctx.out.directives
    assert isinstance(drafted, SetProperties) and isinstance(term, Emit)
    assert drafted.urn == DRAFTED
    assert drafted.values[ROOT_CAUSE_STATUS] == ["PROPOSED"]
    assert drafted.values[CONTROL_SPEC] == [SPEC]  # one line: the UI input strips newlines
    (mcp,) = term.mcps
    assert mcp.entityUrn == DRAFTED and isinstance(mcp.aspect, GlossaryTermInfoClass)
    assert drafted.values[ROOT_CAUSE] == [lesson_on(mcp.aspect).root_cause]

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    stored = load_lesson(catalog, DRAFTED)
    assert stored is not None and stored.state is LessonState.PROPOSED
    assert stored.control == {"type": "uniqueness", "field": "transaction_id"}
    assert structured_values(catalog, DRAFTED, ROOT_CAUSE_STATUS) == ["PROPOSED"]
    assert [w.aspectName for w in catalog.writes] == ["structuredProperties", "glossaryTermInfo"]


def test_a_redelivered_resolution_decides_nothing() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS, key=True)
    ctx = context(catalog)
    decide_and_apply(on_incident_change, resolution(), ctx)
    catalog.writes.clear()

    decide_and_apply(on_incident_change, resolution(), ctx)

    assert ctx.out.directives == []
    assert catalog.writes == []


def test_a_resolved_recurrence_is_noted_on_its_lesson_and_drafts_no_lesson() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    recurrence = Recurrence(incident=INCIDENT_B, dataset=PAYMENTS, snapshot="s1", at=15)
    published_lesson(catalog, approved_at=5, recurrences=[recurrence])
    ctx = context(catalog)
    raised_by = assertion_urn(LESSON, PAYMENTS)

    on_incident_change(resolution(INCIDENT_B, custom_type=RECURRENCE_TYPE, source=raised_by), ctx)

    (save,) = ctx.out.directives  # no workflow properties, no new lesson term
    assert isinstance(save, SaveLesson) and save.lesson.urn == LESSON
    assert save.lesson.recurrences[0].resolved == RecurrenceResolution(
        by=STEWARD, at=20, note="deduplicated"
    )

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    stored = load_lesson(catalog, LESSON)
    assert stored is not None and stored.recurrences[0].resolved is not None
    assert catalog.get_aspect(lesson_urn_for(INCIDENT_B), GlossaryTermInfoClass) is None
