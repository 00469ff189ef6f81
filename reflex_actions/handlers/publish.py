"""Human gate 2 passed: publish the control on the approved scope, with provenance."""

from __future__ import annotations

import logging

from reflex_actions.handlers.approval_values import (
    event_control,
    event_scope,
    scope_refusal,
    scope_words,
)
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.rollout import IN_DECISION, rollout_slice
from reflex_actions.lessons.lifecycle import publish, start_rollout
from reflex_actions.lessons.model import (
    ApprovedVersion,
    Lesson,
    LessonState,
    Rollout,
)
from reflex_actions.lessons.scope import ScopeRule, ScopeRuleError
from reflex_actions.vocabulary import (
    LIFECYCLE,
    VERSION,
)

logger = logging.getLogger(__name__)


def on_approved(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    """Publish exactly what the approval event carries: its scope (the datasets listed and
    those its rule matches now), and its control spec, which must be the control that was
    backtested. The first datasets are published in this decision, the rest in slices."""
    try:
        scope, rule = event_scope(change)
    except ScopeRuleError as error:
        scope, rule = [], None
        if lesson.state is not LessonState.PUBLISHED:
            return str(error)
    if lesson.state is LessonState.PUBLISHED:
        _judge_repeated_approval(lesson, change, scope, rule)
        return None
    if lesson.state is LessonState.RETIRED:
        return (
            "the lesson is retired: set reflex.version to the version to bring back, which is "
            "backtested again and then approved"
        )
    if lesson.state is not LessonState.PENDING_APPROVAL:
        return f"the lesson is {lesson.state.value}: it must be confirmed and backtested first"
    if not lesson.approval_open:
        return (
            "it was written before Reflex opened the approval, so it cannot have seen the "
            "backtest report; approve again now that the report is on this page"
        )
    control = lesson.control or {}
    if event_control(change) != control:
        return (
            "reflex.controlSpec was changed after the backtest: the approval must be on the "
            "control that was backtested (confirm the new control to backtest it)"
        )
    if refusal := scope_refusal(scope, rule):
        return refusal
    earlier = _rolled_back(lesson)
    if earlier is not None and (set(scope) != set(earlier.scope) or rule != earlier.scope_rule):
        return (
            f"a rollback republishes version {earlier.number} exactly, on its scope: "
            + scope_words(earlier.scope, earlier.scope_rule)
            + "; approve that scope, and change it afterwards as a new version"
        )
    replaced = lesson.approved.number if lesson.approved and lesson.in_force else None
    version = _approved_version(lesson, control, scope, rule, change)
    publish(lesson, version, skipped=[], at_ms=change.time_ms)
    start_rollout(lesson, Rollout(publish=version.number, withdraw=[replaced] if replaced else []))
    rollout_slice(lesson, ctx, {}, IN_DECISION)
    ctx.out.set_properties(lesson.urn, {LIFECYCLE: ["ACTIVE"], VERSION: [version.number]})
    detail = f"version {version.number}; scope: {scope_words(scope, rule)}"
    if lesson.rollout is not None:
        detail += f"; {lesson.rollout.progress()}, the rest follows"
    elif lesson.publish_skipped:
        skipped = lesson.publish_skipped
        detail += f"; not published on {len(skipped):,}: " + "; ".join(skipped[:5])
        detail += ", …" if len(skipped) > 5 else ""
    lesson.record_decision("scope approved", change.stamp, detail)
    ctx.out.save_lesson(lesson)
    logger.info("lesson %s published (%s)", lesson.urn, detail)
    return None


def _rolled_back(lesson: Lesson) -> ApprovedVersion | None:
    """The version a waiting rollback republishes, if the draft is one."""
    revision = lesson.revision
    if revision is None or revision.rollback_of is None:
        return None
    return lesson.version(revision.rollback_of)


def _approved_version(
    lesson: Lesson,
    control: dict[str, object],
    scope: list[str],
    rule: ScopeRule | None,
    change: AspectChange,
) -> ApprovedVersion:
    """The version this approval makes: what was approved, by whom, on what backtest. A
    listed scope's record names where it goes (those it cannot go on leave it as the rollout
    finds them); a rule's datasets are the store's to say."""
    revision = lesson.revision
    return ApprovedVersion(
        control=control,
        scope=scope,
        scope_rule=rule,
        actor=change.actor or "",
        at=change.time_ms,
        digest=ApprovedVersion.digest_of(control, scope, rule),
        number=lesson.next_version,
        origin=revision.origin if revision else f"drafted from incident {lesson.incident}",
        rollback_of=revision.rollback_of if revision else None,
        backtest=lesson.backtest,
        report=lesson.report,
        field_mappings=lesson.field_mappings,
        published_scope=scope if rule is None else [],
    )


def _judge_repeated_approval(
    lesson: Lesson, change: AspectChange, scope: list[str], rule: ScopeRule | None
) -> None:
    """A redelivered or replayed approval of a published lesson changes nothing; say whether
    it is the one that was published."""
    control = event_control(change) or {}
    digest = ApprovedVersion.digest_of(control, scope, rule)
    if lesson.approved is not None and digest == lesson.approved.digest:
        logger.info("lesson %s: approval already published exactly; nothing to do", lesson.urn)
        return
    logger.warning(
        "lesson %s: an approval by %s carries a scope or control that differs from the "
        "published version (approved by %s); nothing was changed",
        lesson.urn,
        change.actor,
        lesson.approved.actor if lesson.approved else "unknown",
    )
