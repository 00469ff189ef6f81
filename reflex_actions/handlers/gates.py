"""Structured-property edits by stewards: the two human gates and the ownership approval.

Every decision needs an authorized actor (see HandlerContext.refusal); a refused one is logged
with its reason and changes nothing.
"""

from __future__ import annotations

import logging

from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import load_lesson
from reflex_actions.handlers.ownership import on_ownership_decision, pending_ownership_lesson
from reflex_actions.handlers.publish import on_approval_rejected, on_approved
from reflex_actions.handlers.root_cause import on_root_cause_confirmed, on_root_cause_rejected
from reflex_actions.vocabulary import APPROVAL, OWNERSHIP_CHANGE_APPROVAL, ROOT_CAUSE_STATUS

logger = logging.getLogger(__name__)

LESSON_DECISIONS = (
    (ROOT_CAUSE_STATUS, "CONFIRMED", on_root_cause_confirmed),
    (ROOT_CAUSE_STATUS, "REJECTED", on_root_cause_rejected),
    (APPROVAL, "APPROVED", on_approved),
    (APPROVAL, "REJECTED", on_approval_rejected),
)


def on_lesson_properties(change: AspectChange, ctx: HandlerContext) -> None:
    decisions = [(p, v, h) for p, v, h in LESSON_DECISIONS if change.property_became(p, v)]
    if not decisions:
        return
    lesson = load_lesson(ctx.catalog, change.urn)
    if lesson is None:
        return
    refusal = ctx.refusal(change.actor, lesson.urn)
    for property_urn, value, handle in decisions:
        if refusal:
            logger.warning("ignored %s=%s on %s: %s", property_urn, value, lesson.urn, refusal)
            continue
        handle(lesson, change, ctx)


def on_dataset_properties(change: AspectChange, ctx: HandlerContext) -> None:
    for value, approved in (("APPROVED", True), ("REJECTED", False)):
        if not change.property_became(OWNERSHIP_CHANGE_APPROVAL, value):
            continue
        lesson = pending_ownership_lesson(change.urn, ctx)
        if lesson is None:
            logger.info("%s on %s, but no owner change is pending there", value, change.urn)
            return
        refusal = ctx.refusal(change.actor, lesson.urn)
        if refusal:
            logger.warning("ignored ownership %s on %s: %s", value, change.urn, refusal)
            return
        on_ownership_decision(lesson, change, ctx, approved)
