"""Gate 1 decisions (``on_lesson_properties`` with a CONFIRMED edit): an invalid control is
refused, a valid one is confirmed and proposed for approval, and a lesson that cannot be
backtested goes to ERROR with the reason."""

from __future__ import annotations

from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.directives import SaveLesson, SetProperties, apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.lesson_store import load_lesson, structured_values
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, ROOT_CAUSE, ROOT_CAUSE_STATUS, SCOPE
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    LEDGER,
    LESSON,
    PAYMENTS,
    SPEC,
    add_dataset,
    context,
    kinds,
    lesson,
    property_change,
    store_lesson,
)


def confirmation(spec: str = SPEC) -> AspectChange:
    return property_change(
        LESSON,
        {ROOT_CAUSE_STATUS: ["PROPOSED"], CONTROL_SPEC: [spec]},
        {ROOT_CAUSE_STATUS: ["CONFIRMED"], ROOT_CAUSE: ["a retry re-inserted the batch"]},
    )


def test_an_invalid_control_is_refused_the_status_reverted_and_the_error_shown() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    store_lesson(catalog, lesson())
    ctx = context(catalog)

    on_lesson_properties(confirmation("{type: uniqueness, field: no_such_column}"), ctx)

    revert, save = ctx.out.directives
    assert revert == SetProperties(LESSON, {ROOT_CAUSE_STATUS: ["PROPOSED"]})
    assert isinstance(save, SaveLesson)
    assert save.lesson.state is LessonState.PROPOSED
    assert "no_such_column" in (save.lesson.validation_error or "")
    assert save.lesson.decisions[-1].decision == "confirmation refused"

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    assert structured_values(catalog, LESSON, ROOT_CAUSE_STATUS) == ["PROPOSED"]
    stored = load_lesson(catalog, LESSON)
    assert stored is not None and stored.validation_error == save.lesson.validation_error


def test_a_valid_confirmation_is_saved_then_proposed_for_approval_on_its_scope() -> None:
    """No histories root: the lesson is proposed with a report that says there is no backtest."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    store_lesson(catalog, lesson())
    ctx = context(catalog)

    on_lesson_properties(confirmation(), ctx)

    assert kinds(ctx.out.directives) == ["SaveLesson", "SaveLesson", "SetProperties"]
    confirmed, proposed, opened = ctx.out.directives
    assert isinstance(confirmed, SaveLesson) and isinstance(proposed, SaveLesson)
    assert confirmed.lesson.state is LessonState.CONFIRMED
    assert confirmed.lesson.root_cause == "a retry re-inserted the batch"  # the edit, as carried
    assert proposed.lesson.state is LessonState.PENDING_APPROVAL
    assert not proposed.lesson.approval_open  # until Reflex's PENDING reaches the event log
    assert "No candidate has a snapshot history" in proposed.lesson.report
    assert opened == SetProperties(LESSON, {APPROVAL: ["PENDING"], SCOPE: [PAYMENTS]})

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    stored = load_lesson(catalog, LESSON)
    assert stored is not None and stored.state is LessonState.PENDING_APPROVAL
    assert structured_values(catalog, LESSON, APPROVAL) == ["PENDING"]
    assert structured_values(catalog, LESSON, SCOPE) == [PAYMENTS]


def test_a_lesson_whose_source_dataset_is_unknown_goes_to_error_with_the_reason() -> None:
    catalog = MemoryCatalog()
    store_lesson(catalog, lesson(source_dataset=None, affected_assets=[LEDGER]))
    ctx = context(catalog)

    on_lesson_properties(confirmation(), ctx)

    assert kinds(ctx.out.directives) == ["SaveLesson", "SetProperties", "SaveLesson"]
    confirmed, revert, failed = ctx.out.directives
    assert isinstance(confirmed, SaveLesson) and confirmed.lesson.state is LessonState.CONFIRMED
    assert revert == SetProperties(LESSON, {ROOT_CAUSE_STATUS: ["PROPOSED"]})  # confirm again
    assert isinstance(failed, SaveLesson) and failed.lesson.state is LessonState.ERROR
    assert f"names {LEDGER}, which is not in the catalog" in (failed.lesson.error or "")
    assert ctx.refusals == [failed.lesson.error]

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    stored = load_lesson(catalog, LESSON)
    assert stored is not None and stored.state is LessonState.ERROR
    assert stored.decisions[-1].decision == "confirmation refused"
