"""Human gate 1: a steward confirms (possibly after editing) or rejects the drafted root cause.

The confirmation acts on the root cause and control spec in the event that carried it, not on
what the store holds when it is handled.
"""

from __future__ import annotations

import logging

from reflex_actions.catalog.base import CatalogError
from reflex_actions.controls import control_spec, dump_control_yaml, parse_control_yaml
from reflex_actions.errors import ControlSpecError, ReflexError
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import as_text
from reflex_actions.handlers.proposal import propose
from reflex_actions.lessons.lifecycle import (
    awaits_confirmation,
    can_move,
    confirm,
    fail,
    refuse_confirmation,
    reject,
)
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.lessons.validation import parse_steward_control
from reflex_actions.patterns import UNKNOWN_PATTERN
from reflex_actions.registry import kind_for_control
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE, ROOT_CAUSE_STATUS

logger = logging.getLogger(__name__)


def on_root_cause_confirmed(
    lesson: Lesson, change: AspectChange, ctx: HandlerContext
) -> str | None:
    if awaits_confirmation(lesson):
        refusal = _confirm(lesson, change, ctx)
        if refusal:
            return refusal
    # CONFIRMED also after a crash between confirm and propose; PENDING_APPROVAL before Reflex's
    # PENDING reached the log, after a crash between the report and the PENDING write
    if lesson.state is LessonState.CONFIRMED or (
        lesson.state is LessonState.PENDING_APPROVAL and not lesson.approval_open
    ):
        return _propose(lesson, ctx)
    logger.warning(
        "lesson %s is %s: a new confirmation is ignored (reject it and draft anew to change "
        "a backtested or published control)",
        lesson.urn,
        lesson.state.value,
    )
    return None


def _confirm(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    """Validate the steward's root cause and control as the event carries them, and record the
    decision; an invalid edit keeps the lesson PROPOSED with the error on its page."""
    root_cause = as_text(change.property_values(ROOT_CAUSE)) or lesson.root_cause
    spec_text = as_text(change.property_values(CONTROL_SPEC))
    source = ctx.catalog.dataset(lesson.source_dataset) if lesson.source_dataset else None
    try:
        if not spec_text.strip():
            raise ControlSpecError(
                "reflex.controlSpec is empty: a confirmed lesson needs a control"
            )
        pattern = lesson.failure_pattern
        if pattern == UNKNOWN_PATTERN:  # the steward named the control: its kind names the pattern
            pattern = _pattern_of(spec_text)
        control = parse_steward_control(spec_text, pattern, source, ctx.catalog)
    except ControlSpecError as error:
        refuse_confirmation(lesson, str(error))
        return str(error)
    confirm(lesson, failure_pattern=pattern, root_cause=root_cause, control=control_spec(control))
    lesson.record_decision("root cause confirmed", change.stamp, dump_control_yaml(control).strip())
    ctx.out.save_lesson(lesson)
    return None


def _propose(lesson: Lesson, ctx: HandlerContext) -> str | None:
    """Backtest and report; a lesson that cannot be backtested goes back to PROPOSED with the
    reason on its page (never stuck CONFIRMED)."""
    try:
        propose(lesson, ctx)
    except CatalogError:
        raise
    except ReflexError as error:
        reason = f"the confirmed control could not be backtested: {error}"
        fail(lesson, reason)
        return reason
    return None


def _pattern_of(spec_text: str) -> str:
    kind = kind_for_control(parse_control_yaml(spec_text).type)
    return kind.pattern if kind else UNKNOWN_PATTERN


def on_root_cause_rejected(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    if lesson.approved is not None:
        return (
            "a published lesson is not rejected but retired (reflex.lifecycle RETIRED), so its "
            "record stays; reject the version waiting for approval with reflex.approval"
        )
    if not can_move(lesson, LessonState.REJECTED) or lesson.state is LessonState.REJECTED:
        return None
    reject(lesson, ROOT_CAUSE_STATUS)
    lesson.record_decision("lesson rejected", change.stamp)
    ctx.out.save_lesson(lesson)
    logger.info("lesson %s rejected by %s; nothing will be published", lesson.urn, change.actor)
    return None
