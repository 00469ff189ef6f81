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
from reflex_actions.handlers.publish import on_approved
from reflex_actions.handlers.root_cause import on_root_cause_confirmed, on_root_cause_rejected
from reflex_actions.handlers.versions import (
    draft_values,
    edit_made,
    on_approval_rejected,
    on_retired,
    on_rollback,
    on_version_edit,
    retirement_asked,
    rollback_asked,
    version_shown,
)
from reflex_actions.lessons.lifecycle import judged_at, open_approval
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.vocabulary import (
    APPROVAL,
    LIFECYCLE,
    OWNERSHIP_CHANGE_APPROVAL,
    ROOT_CAUSE_STATUS,
    VERSION,
    display_name,
)

logger = logging.getLogger(__name__)

#: A decision handler returns None when it acted (or had nothing to do), else why it refused.
DecisionHandler = Callable[[Lesson, AspectChange, HandlerContext], "str | None"]
#: Whether an event makes a decision.
DecisionTest = Callable[[Lesson, AspectChange, HandlerContext], bool]
PropertyValues = dict[str, list[str | float]]


@dataclass(frozen=True)
class LessonDecision:
    #: what the decision is called on the lesson page
    name: str
    made_by: DecisionTest
    handle: DecisionHandler
    #: where a refusal puts the edited properties back: the values Reflex last set
    restores: Callable[[Lesson], PropertyValues]


def _became(property_urn: str, value: str) -> DecisionTest:
    """The property became ``value``, unless that is Reflex putting back the value it last set
    (after a refused draft, say): every other write, Reflex's own actor's too, is a decision
    (with metadata-service auth off, a steward's edit is recorded as DataHub's system actor,
    and its refusal on the page is how they learn why nothing happened)."""

    def made_by(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> bool:
        restored = ctx.gate.is_own(change.actor) and lesson.gate_values.get(property_urn) == value
        return change.property_became(property_urn, value) and not restored

    return made_by


def _gate_value(property_urn: str) -> Callable[[Lesson], PropertyValues]:
    def restores(lesson: Lesson) -> PropertyValues:
        value = lesson.gate_values.get(property_urn)
        return {} if value is None else {property_urn: [value]}

    return restores


def _version_in_force(lesson: Lesson) -> PropertyValues:
    return {VERSION: [version_shown(lesson)]} if lesson.approved else {}


LESSON_DECISIONS = (
    # a published lesson's later life first: an approval in the same event then decides on
    # the draft it made (and is refused, since that draft's report is new)
    LessonDecision("retirement", retirement_asked, on_retired, _gate_value(LIFECYCLE)),
    LessonDecision("rollback", rollback_asked, on_rollback, _version_in_force),
    LessonDecision("new version", edit_made, on_version_edit, draft_values),
    LessonDecision(
        "confirmation",
        _became(ROOT_CAUSE_STATUS, "CONFIRMED"),
        on_root_cause_confirmed,
        _gate_value(ROOT_CAUSE_STATUS),
    ),
    LessonDecision(
        "rejection",
        _became(ROOT_CAUSE_STATUS, "REJECTED"),
        on_root_cause_rejected,
        _gate_value(ROOT_CAUSE_STATUS),
    ),
    LessonDecision("approval", _became(APPROVAL, "APPROVED"), on_approved, _gate_value(APPROVAL)),
    LessonDecision(
        "scope rejection",
        _became(APPROVAL, "REJECTED"),
        on_approval_rejected,
        _gate_value(APPROVAL),
    ),
)


def on_lesson_properties(change: AspectChange, ctx: HandlerContext) -> None:
    lesson = ctx.lesson(change.urn)
    if lesson is None:
        return
    if change.before(lesson.judged):
        logger.info(
            "lesson %s: an event before its latest decision in the log decides nothing",
            lesson.urn,
        )
        return
    if ctx.gate.is_own(change.actor) and change.property_values(APPROVAL) == ["PENDING"]:
        _open_approval(lesson, ctx)
    for decision in LESSON_DECISIONS:
        if not decision.made_by(lesson, change, ctx):
            continue
        if lesson.state is LessonState.REJECTED:
            logger.info("lesson %s was rejected: %s ignored", lesson.urn, decision.name)
            continue
        judged_at(lesson, change.position)
        reason = ctx.gate.refusal(change.actor, lesson.urn)
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
            _refuse(lesson, change, decision.name, reason, ctx, decision.restores(lesson))


def _open_approval(lesson: Lesson, ctx: HandlerContext) -> None:
    """Reflex's own PENDING reached the event log after the report: from here on, an approval
    decides on a report that exists. Approvals earlier in the log are refused."""
    if open_approval(lesson):
        ctx.out.save_lesson(lesson)
        logger.info("lesson %s: open for approval", lesson.urn)


def _refuse(
    lesson: Lesson,
    change: AspectChange,
    name: str,
    reason: str,
    ctx: HandlerContext,
    restore: PropertyValues,
) -> None:
    """Revert the edited properties to ``restore`` (the values Reflex last set) and write the
    refusal on the lesson page; a refusal already written (a redelivered or replayed event)
    changes nothing."""
    if not lesson.record_decision(f"{name} refused", change.stamp, reason):
        return
    logger.warning("lesson %s: %s by %s refused: %s", lesson.urn, name, change.actor, reason)
    ctx.refusals.append(reason)
    reverted = {
        urn: values for urn, values in restore.items() if change.property_values(urn) != values
    }
    if reverted:
        ctx.out.set_properties(change.urn, reverted)
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
        reason = ctx.gate.refusal(change.actor, lesson.urn) or on_ownership_decision(
            lesson, change, ctx, approved
        )
        if reason:  # back to the PENDING Reflex set with its proposal
            _refuse(lesson, change, name, reason, ctx, {OWNERSHIP_CHANGE_APPROVAL: ["PENDING"]})
        return
