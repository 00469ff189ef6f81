"""Human gate 1: a steward confirms (possibly after editing) or rejects the drafted root cause."""

from __future__ import annotations

import logging

from reflex_actions.controls import dump_control_yaml, parse_control_yaml
from reflex_actions.errors import ControlSpecError
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import as_text, save_lesson, structured_values
from reflex_actions.handlers.proposal import propose
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.lessons.validation import CONTROL_TYPE_FOR, parse_steward_control
from reflex_actions.patterns import FailurePattern
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE, ROOT_CAUSE_STATUS

logger = logging.getLogger(__name__)

PATTERN_FOR_CONTROL = {control: pattern for pattern, control in CONTROL_TYPE_FOR.items()}


def _decision(lesson: Lesson, change: AspectChange, decision: str, detail: str = "") -> None:
    lesson.decisions.append(
        {"decision": decision, "actor": change.actor, "at": change.time_ms, "detail": detail}
    )


def on_root_cause_confirmed(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> None:
    if lesson.state is LessonState.PROPOSED and not _confirm(lesson, change, ctx):
        return
    if lesson.state is LessonState.CONFIRMED:  # also after a crash between confirm and propose
        propose(lesson, ctx)
    elif lesson.state is not LessonState.PROPOSED:
        logger.warning(
            "lesson %s is %s: a new confirmation is ignored (reject it and draft anew to change "
            "a backtested or published control)",
            lesson.urn,
            lesson.state.value,
        )


def _confirm(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> bool:
    """Re-read the steward's root cause and control, validate them, and record the decision;
    an invalid edit sends the lesson back to PROPOSED with the error on its page."""
    catalog, actor = ctx.catalog, ctx.config.service_actor
    root_cause = as_text(structured_values(catalog, lesson.urn, ROOT_CAUSE)) or lesson.root_cause
    spec_text = as_text(structured_values(catalog, lesson.urn, CONTROL_SPEC))
    source = catalog.dataset(lesson.source_dataset) if lesson.source_dataset else None
    try:
        if not spec_text.strip():
            raise ControlSpecError(
                "reflex.controlSpec is empty: a confirmed lesson needs a control"
            )
        pattern = lesson.failure_pattern
        if pattern is FailurePattern.UNKNOWN:  # the steward named the control: it names the pattern
            pattern = _pattern_of(spec_text)
        control = parse_steward_control(spec_text, pattern, source)
    except ControlSpecError as error:
        lesson.validation_error = str(error)
        _decision(lesson, change, "confirmation refused", str(error))
        save_lesson(catalog, lesson, actor)
        catalog.set_structured_properties(lesson.urn, {ROOT_CAUSE_STATUS: ["PROPOSED"]}, actor)
        logger.warning("lesson %s: confirmation by %s refused: %s", lesson.urn, change.actor, error)
        return False
    lesson.failure_pattern = pattern
    lesson.root_cause = root_cause
    lesson.control = {
        "type": control.type,
        **control.model_dump(mode="json", exclude_defaults=True),
    }
    lesson.validation_error = None
    lesson.state = LessonState.CONFIRMED
    _decision(lesson, change, "root cause confirmed", dump_control_yaml(control).strip())
    save_lesson(catalog, lesson, actor)
    return True


def _pattern_of(spec_text: str) -> FailurePattern:
    return PATTERN_FOR_CONTROL.get(parse_control_yaml(spec_text).type, FailurePattern.UNKNOWN)


def on_root_cause_rejected(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> None:
    if lesson.state in (LessonState.REJECTED, LessonState.PUBLISHED):
        return
    lesson.state = LessonState.REJECTED
    _decision(lesson, change, "lesson rejected")
    save_lesson(ctx.catalog, lesson, ctx.config.service_actor)
    logger.info("lesson %s rejected by %s; nothing will be published", lesson.urn, change.actor)
