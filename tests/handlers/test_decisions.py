"""Handler decisions, fast and without a store: a handler reads the catalog (here the in-memory
double that passes the catalog conformance suite) and returns typed directives; nothing is
written until the applier writes them, and a failed decision writes nothing."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from datahub.metadata.schema_classes import AssertionRunEventClass, GlossaryTermInfoClass

from reflex_actions.catalog.base import CatalogError
from reflex_actions.handlers.context import decide_and_apply
from reflex_actions.handlers.directives import Emit, SaveLesson, SetProperties, apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.lesson_store import (
    MAX_TERM_BYTES,
    load_lesson,
    structured_values,
    term_bytes,
)
from reflex_actions.handlers.rollout import IN_DECISION, SLICE_DATASETS, continue_rollouts
from reflex_actions.lessons.model import LessonState, LogPosition
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    COVERAGE,
    LIFECYCLE,
    ROOT_CAUSE_STATUS,
    SCOPE,
    VERSION,
)
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    INTRUDER,
    LEDGER,
    LESSON,
    PAYMENTS,
    REFLEX,
    SPEC,
    STEWARD,
    add_dataset,
    approval,
    context,
    lesson,
    pending_lesson,
    property_change,
    published_lesson,
    store_lesson,
)


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
    assert kinds == ["Emit", "SetProperties", "SetProperties", "SaveLesson"]
    emit = ctx.out.directives[0]
    assert isinstance(emit, Emit) and emit.mcps[0].aspectName == "assertionInfo"
    assert ctx.out.directives[2] == SetProperties(LESSON, {LIFECYCLE: ["ACTIVE"], VERSION: [1]})
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


def test_an_approval_on_more_datasets_than_a_count_allowed_publishes_each_within_the_record() -> (
    None
):
    """A scope is bounded by what the lesson's record holds, not by a count: 1,100 datasets
    (once more than a version could be published on) are each covered, and the term, its
    decision line and its page stay short. The approval's decision publishes the first
    IN_DECISION; the rest goes out in slices of SLICE_DATASETS, each a decision of its own."""
    catalog = MemoryCatalog()
    scope = tuple(f"{PAYMENTS[:-6]}_{n:04d},PROD)" for n in range(1100))
    for urn in scope:
        add_dataset(catalog, urn)
    ctx = context(catalog)
    pending_lesson(catalog)

    decide_and_apply(on_lesson_properties, approval(STEWARD, scope=scope), ctx)

    stored = load_lesson(catalog, LESSON)
    assert stored is not None and stored.state is LessonState.PUBLISHED
    assert stored.rollout is not None and stored.rollout.published == IN_DECISION
    covered = [urn for urn in scope if structured_values(catalog, urn, COVERAGE) == [LESSON]]
    assert covered == list(scope[:IN_DECISION])
    detail = stored.decisions[-1].detail
    assert detail.startswith("version 1; scope: 1,100 datasets: ") and len(detail) < 300
    assert "500 published, 0 skipped so far, the rest follows" in detail

    slices = continue_rollouts(ctx)

    assert slices == -(-(len(scope) - IN_DECISION) // SLICE_DATASETS)
    stored = load_lesson(catalog, LESSON)
    assert stored is not None and stored.rollout is None
    assert stored.published_scope == list(scope) and stored.published_count == len(scope)
    assert all(structured_values(catalog, urn, COVERAGE) == [LESSON] for urn in scope)
    term = catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert term is not None and term_bytes(term) <= MAX_TERM_BYTES
    assert continue_rollouts(ctx) == 0  # nothing left: no decision, no write


# --- what makes an event a decision, and what a refusal writes (issue 28 item 9) ----------------


def test_an_event_on_a_term_that_is_no_lesson_decides_nothing() -> None:
    catalog = MemoryCatalog()
    ctx = context(catalog)
    on_lesson_properties(approval(STEWARD), ctx)
    assert ctx.out.directives == [] and ctx.refusals == []


def test_an_event_before_the_lesson_s_latest_decision_in_the_log_decides_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    pending_lesson(catalog, judged=LogPosition(stream="test", offset=10**9))
    ctx = context(catalog)
    with caplog.at_level(logging.INFO, logger="reflex_actions.handlers.gates"):
        on_lesson_properties(approval(STEWARD), ctx)
    assert ctx.out.directives == [] and ctx.refusals == []
    assert "an event before its latest decision in the log decides nothing" in caplog.text


def test_an_edit_of_the_version_in_force_is_decided_as_a_new_version() -> None:
    """An invalid edit is refused as a new version: the spec goes back to the version's."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    published_lesson(catalog, approved_at=5)
    ctx = context(catalog)
    before = {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["APPROVED"], SCOPE: [PAYMENTS]}
    edit = property_change(
        LESSON,
        {**before, CONTROL_SPEC: [SPEC]},
        {CONTROL_SPEC: ["{type: not_null, field: transaction_id}"]},
    )

    on_lesson_properties(edit, ctx)

    revert, save = ctx.out.directives
    assert revert == SetProperties(LESSON, {CONTROL_SPEC: [SPEC]})
    assert isinstance(save, SaveLesson)
    assert save.lesson.decisions[-1].decision == "new version refused"
    assert save.lesson.judged == edit.position  # the latest decision on it, refused or not
    assert "the edited control is not valid" in ctx.refusals[0]


class _StoreDown(MemoryCatalog):
    """The store fails while a decision reads a dataset."""

    def get_aspect(self, urn: str, aspect_class: Any) -> Any:
        if urn == PAYMENTS:
            raise CatalogError("the store is down")
        return super().get_aspect(urn, aspect_class)


def test_a_store_failure_during_a_decision_is_raised_for_the_pipeline_to_retry() -> None:
    catalog = _StoreDown()
    add_dataset(catalog, PAYMENTS)
    pending_lesson(catalog)
    ctx = context(catalog)
    with pytest.raises(CatalogError, match="the store is down"):
        on_lesson_properties(approval(STEWARD), ctx)
    assert ctx.refusals == []  # not a refusal: the event is handled again


def test_only_reflex_s_own_pending_opens_an_approval(caplog: pytest.LogCaptureFixture) -> None:
    catalog = MemoryCatalog()
    store_lesson(
        catalog,
        lesson(
            state=LessonState.PENDING_APPROVAL,
            gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "PENDING"},
        ),
    )
    ctx = context(catalog)
    before = {ROOT_CAUSE_STATUS: ["CONFIRMED"], SCOPE: [PAYMENTS], CONTROL_SPEC: [SPEC]}
    on_lesson_properties(property_change(LESSON, before, {APPROVAL: ["PENDING"]}), ctx)
    assert ctx.out.directives == []  # a steward's PENDING opens nothing

    with caplog.at_level(logging.INFO, logger="reflex_actions.handlers.gates"):
        on_lesson_properties(property_change(LESSON, before, {APPROVAL: ["PENDING"]}, REFLEX), ctx)
    (save,) = ctx.out.directives
    assert isinstance(save, SaveLesson) and save.lesson.approval_open
    assert f"lesson {LESSON}: open for approval" in caplog.text


def test_a_rejected_lesson_ignores_every_later_decision(caplog: pytest.LogCaptureFixture) -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    store_lesson(
        catalog,
        lesson(
            state=LessonState.REJECTED,
            gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "REJECTED"},
        ),
    )
    ctx = context(catalog)
    with caplog.at_level(logging.INFO, logger="reflex_actions.handlers.gates"):
        on_lesson_properties(approval(STEWARD), ctx)
    assert ctx.out.directives == [] and ctx.refusals == []
    assert f"lesson {LESSON} was rejected: approval ignored" in caplog.text
