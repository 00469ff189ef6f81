"""Handler decisions, fast and without a store: a handler reads the catalog (here the in-memory
double that passes the catalog conformance suite) and returns typed directives; nothing is
written until the applier writes them, and a failed decision writes nothing."""

from __future__ import annotations

import json
from typing import Any

from datahub.emitter.serialization_helper import pre_json_transform
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    StringTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext, decide_and_apply
from reflex_actions.handlers.directives import Emit, SaveLesson, SetProperties, apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.lesson_store import lesson_term_mcp
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.lessons.model import Lesson, LessonState, ProposerInfo
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, ROOT_CAUSE_STATUS, SCOPE
from tests.catalog.builders import field, schema
from tests.catalog.memory_catalog import MemoryCatalog

LESSON = "urn:li:glossaryTerm:reflex.lesson.t"
PAYMENTS = "urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.payments,PROD)"
LEDGER = "urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.ledger,PROD)"
STEWARD, INTRUDER = "urn:li:corpuser:alice", "urn:li:corpuser:maria"
CONTROL = {"type": "uniqueness", "field": "transaction_id"}


def pending_lesson(catalog: MemoryCatalog, **changes: Any) -> Lesson:
    fields: dict[str, Any] = {"control": CONTROL, **changes}
    lesson = Lesson(
        urn=LESSON,
        incident="urn:li:incident:t",
        source_dataset=PAYMENTS,
        affected_assets=[PAYMENTS],
        failure_pattern=DUPLICATE_ROWS,
        root_cause="a retry re-inserted rows",
        evidence=[],
        confidence=0.9,
        rationale="",
        proposer=ProposerInfo(name="deterministic"),
        state=LessonState.PENDING_APPROVAL,
        gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "PENDING"},
        approval_open=True,
        **fields,
    )
    catalog.emit([lesson_term_mcp(lesson, "t", "urn:li:corpuser:datahub-reflex")])
    catalog.writes.clear()
    return lesson


def properties(values: dict[str, list[str]]) -> dict[str, Any]:
    aspect = StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(propertyUrn=p, values=list(v))
            for p, v in values.items()
        ]
    )
    return json.loads(json.dumps(pre_json_transform(aspect.to_obj())))


def approval(
    actor: str,
    spec: str = "{type: uniqueness, field: transaction_id}",
    scope: tuple[str, ...] = (PAYMENTS,),
) -> AspectChange:
    before = {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["PENDING"], SCOPE: list(scope)}
    return AspectChange(
        entity_type="glossaryTerm",
        urn=LESSON,
        aspect_name="structuredProperties",
        aspect=properties({**before, APPROVAL: ["APPROVED"], CONTROL_SPEC: [spec]}),
        previous=properties({**before, CONTROL_SPEC: [spec]}),
        actor=actor,
        time_ms=10,
    )


def add_dataset(catalog: MemoryCatalog, urn: str) -> None:
    column = field("transaction_id", "VARCHAR", StringTypeClass())
    catalog.emit([acting_as(STEWARD, urn, schema(column))])
    catalog.writes.clear()


def context(catalog: MemoryCatalog) -> HandlerContext:
    return HandlerContext(catalog, ReflexConfig.model_validate({"approvers": {"users": [STEWARD]}}))


def test_a_refused_approval_decides_a_revert_and_a_page_note_and_writes_nothing_itself() -> None:
    catalog = MemoryCatalog()
    pending_lesson(catalog)
    ctx = context(catalog)

    on_lesson_properties(approval(INTRUDER), ctx)

    assert catalog.writes == []  # the decision alone writes nothing
    revert, save = ctx.out.directives
    assert revert == SetProperties(LESSON, {APPROVAL: ["PENDING"]})
    assert isinstance(save, SaveLesson)
    assert save.lesson.decisions[-1].decision == "approval refused"
    assert ctx.refusals and "is not an approver" in ctx.refusals[0]

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    assert [w.aspectName for w in catalog.writes] == ["structuredProperties", "glossaryTermInfo"]


def test_an_approval_publishes_assertion_then_coverage_then_the_lesson() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    ctx = context(catalog)
    pending_lesson(catalog)

    on_lesson_properties(approval(STEWARD), ctx)

    kinds = [type(d).__name__ for d in ctx.out.directives]
    assert kinds == ["Emit", "SetProperties", "SaveLesson"]
    emit = ctx.out.directives[0]
    assert isinstance(emit, Emit) and emit.mcps[0].aspectName == "assertionInfo"
    saved = ctx.out.directives[-1]
    assert isinstance(saved, SaveLesson)
    assert saved.lesson.state is LessonState.PUBLISHED and saved.lesson.approved is not None


def test_a_decision_that_fails_midway_writes_nothing_of_it() -> None:
    """The second scoped dataset needs a renaming the control cannot make: publishing raises
    after the first dataset's assertion was decided; those directives are dropped and only the
    refusal (the revert and the page) is written."""
    catalog = MemoryCatalog()
    for urn in (PAYMENTS, LEDGER):
        add_dataset(catalog, urn)
    pending_lesson(
        catalog,
        control={"type": "active_ownership"},
        field_mappings={LEDGER: {"transaction_id": "txn_id"}},
    )
    ctx = context(catalog)
    change = approval(STEWARD, spec="{type: active_ownership}", scope=(PAYMENTS, LEDGER))

    decide_and_apply(on_lesson_properties, change, ctx)

    written = [w.aspectName for w in catalog.writes]
    assert "assertionInfo" not in written
    assert catalog.latest_timeseries(LESSON, AssertionRunEventClass) is None
    assert written == ["structuredProperties", "glossaryTermInfo"]  # the revert and the page
