"""Structured-property edits by stewards: the two human gates and the ownership approval.

A decision acts on the values of the event that carried it, never on what the store holds when
the event is handled (DESIGN §9). A refused decision — an unauthorized actor, the wrong moment,
values that are not what was backtested — is reverted to the value Reflex last set and the
refusal is written on the lesson page, so the next authorized decision is again a transition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from reflex_actions.catalog.base import CatalogError
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.ownership import on_ownership_decision, pending_ownership_lesson
from reflex_actions.handlers.publish import on_approval_rejected, on_approved
from reflex_actions.handlers.root_cause import on_root_cause_confirmed, on_root_cause_rejected
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.vocabulary import (
    APPROVAL,
    OWNERSHIP_CHANGE_APPROVAL,
    ROOT_CAUSE_STATUS,
    display_name,
)

logger = logging.getLogger(__name__)

#: A decision handler returns None when it acted (or had nothing to do), else why it refused.
DecisionHandler = Callable[[Lesson, AspectChange, HandlerContext], "str | None"]


@dataclass(frozen=True)
class LessonDecision:
    property_urn: str
    value: str
    #: what the decision is called on the lesson page
    name: str
    handle: DecisionHandler


LESSON_DECISIONS = (
    LessonDecision(ROOT_CAUSE_STATUS, "CONFIRMED", "confirmation", on_root_cause_confirmed),
    LessonDecision(ROOT_CAUSE_STATUS, "REJECTED", "rejection", on_root_cause_rejected),
    LessonDecision(APPROVAL, "APPROVED", "approval", on_approved),
    LessonDecision(APPROVAL, "REJECTED", "scope rejection", on_approval_rejected),
)


def on_lesson_properties(change: AspectChange, ctx: HandlerContext) -> None:
    lesson = ctx.lesson(change.urn)
    if lesson is None:
        return
    if ctx.is_own(change.actor) and change.property_values(APPROVAL) == ["PENDING"]:
        _open_approval(lesson, ctx)
    for decision in LESSON_DECISIONS:
        if not change.property_became(decision.property_urn, decision.value):
            continue
        if lesson.state is LessonState.REJECTED:
            logger.info("lesson %s was rejected: %s ignored", lesson.urn, decision.name)
            continue
        reason = ctx.refusal(change.actor, lesson.urn)
        if reason is None:
            mark, before = ctx.out.mark(), lesson.model_copy(deep=True)
            try:
                reason = decision.handle(lesson, change, ctx)
            except CatalogError:
                raise  # the store: retried by the pipeline
            except ReflexError as error:
                reason = f"it could not be carried out: {error}"
                ctx.out.rollback(mark)  # nothing of the failed decision is written
                lesson = before
        if reason:
            restore = lesson.gate_values.get(decision.property_urn)
            _refuse(lesson, change, decision.property_urn, decision.name, reason, ctx, restore)


def _open_approval(lesson: Lesson, ctx: HandlerContext) -> None:
    """Reflex's own PENDING reached the event log after the report: from here on, an approval
    decides on a report that exists. Approvals earlier in the log are refused."""
    if lesson.state is LessonState.PENDING_APPROVAL and not lesson.approval_open:
        lesson.approval_open = True
        ctx.out.save_lesson(lesson)
        logger.info("lesson %s: open for approval", lesson.urn)


def _refuse(
    lesson: Lesson,
    change: AspectChange,
    property_urn: str,
    name: str,
    reason: str,
    ctx: HandlerContext,
    restore: str | None,
) -> None:
    """Revert the property to ``restore`` (the value Reflex last set) and write the refusal on
    the lesson page; a refusal already written (a redelivered or replayed event) changes
    nothing."""
    if not lesson.record_decision(f"{name} refused", change.actor, change.time_ms, reason):
        return
    logger.warning("lesson %s: %s by %s refused: %s", lesson.urn, name, change.actor, reason)
    ctx.refusals.append(reason)
    if restore is not None and change.property_values(property_urn) != [restore]:
        ctx.out.set_properties(change.urn, {property_urn: [restore]})
    ctx.out.save_lesson(lesson)


def on_dataset_properties(change: AspectChange, ctx: HandlerContext) -> None:
    for value, approved in (("APPROVED", True), ("REJECTED", False)):
        if not change.property_became(OWNERSHIP_CHANGE_APPROVAL, value):
            continue
        lesson = pending_ownership_lesson(change.urn, ctx)
        if lesson is None:
            logger.info("%s on %s, but no owner change is pending there", value, change.urn)
            return
        name = f"ownership change {'approval' if approved else 'rejection'} on "
        name += display_name(change.urn)
        reason = ctx.refusal(change.actor, lesson.urn) or on_ownership_decision(
            lesson, change, ctx, approved
        )
        if reason:  # back to the PENDING Reflex set with its proposal
            _refuse(lesson, change, OWNERSHIP_CHANGE_APPROVAL, name, reason, ctx, "PENDING")
        return
