"""A published lesson's later life: new versions, retirement and rollback, each through gate 2.

A steward edits ``reflex.controlSpec`` or ``reflex.scope`` of a published lesson, or sets
``reflex.version`` to an earlier version's number: Reflex drafts the new version, validates and
backtests it, and asks for approval; the version in force keeps running until one is approved,
and a refused draft leaves it as it was. ``reflex.lifecycle`` RETIRED withdraws the lesson's
assertions and coverage; its recurrences and history stay on its page.

Each of these decisions is judged by the state at the event's time (DESIGN §9): an event older
than the lesson's latest decision was decided already (a redelivery) or was overtaken by it (a
replay of the log), so it changes nothing.
"""

from __future__ import annotations

import logging
from typing import Literal

from reflex_actions.controls import control_spec, parse_control_spec, spec_line
from reflex_actions.errors import ControlSpecError
from reflex_actions.handlers.approval_values import (
    event_control,
    event_scope,
    scope_refusal,
    scope_words,
)
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import as_text
from reflex_actions.handlers.proposal import propose
from reflex_actions.handlers.rollout import IN_DECISION, rollout_slice
from reflex_actions.lessons.lifecycle import (
    draft_revision,
    refuse_revision,
    reject,
    retire,
    start_rollout,
)
from reflex_actions.lessons.model import ApprovedVersion, Lesson, LessonState, Revision, Rollout
from reflex_actions.lessons.scope import ScopeRule, ScopeRuleError
from reflex_actions.lessons.validation import parse_steward_control
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    LIFECYCLE,
    OWNERSHIP_CHANGE_APPROVAL,
    PROPOSED_OWNER,
    SCOPE,
    SCOPE_RULE,
    VERSION,
    display_name,
)
from reflex_actions.wording import plural

logger = logging.getLogger(__name__)

PropertyValues = dict[str, list[str | float]]


def _new_event(lesson: Lesson, change: AspectChange, rollback: bool = False) -> bool:
    """Whether the event came after the lesson's latest decision in the log (a redelivered one
    was decided already, unless it drafted a version, an edit or a ``rollback``, whose approval
    was never opened: a crash came between them, and drafting again finishes it). An event
    whose place in the log is unknown is new.

    Reflex's own writes are judged like anyone's: those that put back or pre-fill what the
    lesson holds change nothing and so decide nothing; any other is refused, with the reason
    on the page (with metadata-service auth off, a steward's edit is recorded as DataHub's
    system actor, and the refusal is how they learn why nothing happened)."""
    if not _redelivered(lesson, change) and not change.before(lesson.judged):
        return True
    return _unfinished_draft(lesson, change, rollback)


def _redelivered(lesson: Lesson, change: AspectChange) -> bool:
    """The event is the lesson's latest decision, delivered again."""
    return change.position is not None and change.position == lesson.judged


def _unfinished_draft(lesson: Lesson, change: AspectChange, rollback: bool) -> bool:
    """The event is the lesson's latest decision, delivered again, and it drafted a version
    (or a ``rollback``) whose approval was never opened."""
    revision = lesson.revision
    return (
        _redelivered(lesson, change)
        and lesson.state is LessonState.PENDING_APPROVAL
        and revision is not None
        and (revision.rollback_of is not None) == rollback
        and not lesson.approval_open
    )


def _version_number(values: list[str | float]) -> int | None:
    """``reflex.version``'s value as a whole number (DataHub stores numbers as doubles)."""
    if len(values) != 1 or isinstance(values[0], str):
        return None
    number = values[0]
    return int(number) if float(number).is_integer() and 0 < number < 2**31 else None


def retirement_asked(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> bool:
    return _new_event(lesson, change) and change.property_became(LIFECYCLE, "RETIRED")


def version_shown(lesson: Lesson) -> int:
    """What ``reflex.version`` shows: the version in force, 0 when none is (retired)."""
    if lesson.approved is None or lesson.state is LessonState.RETIRED:
        return 0
    return lesson.approved.number


def rollback_asked(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> bool:
    values = change.property_values(VERSION)
    return (
        _new_event(lesson, change, rollback=True)
        and bool(values)
        and values != change.property_values(VERSION, previous=True)
        and values != [version_shown(lesson)]
    )


def edit_made(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> bool:
    """Whether the event edits the control or scope of the version in force (published), or
    the control of the draft waiting for approval (a scope edit there is what approval takes)."""
    if lesson.approved is None or not _new_event(lesson, change):
        return False
    if _unfinished_draft(lesson, change, rollback=False):
        return True
    if lesson.state is LessonState.PUBLISHED:
        return event_control(change) != lesson.approved.control or _scope_edited(
            lesson.approved, change
        )
    return (
        lesson.state is LessonState.PENDING_APPROVAL
        and lesson.revision is not None
        and event_control(change) != lesson.control
    )


def _scope_edited(version: ApprovedVersion, change: AspectChange) -> bool:
    """Whether the event's scope (its datasets, its rule) is not the version's."""
    try:
        scope, rule = event_scope(change)
    except ScopeRuleError:
        return True  # drafting it says what is wrong with the rule
    return set(scope) != set(version.scope) or rule != version.scope_rule


def in_force_values(lesson: Lesson) -> PropertyValues:
    """The lesson's editable properties as the version in force holds them: where a refused
    edit, rollback or retirement puts them back."""
    approved = lesson.approved
    if approved is None:
        return {}
    return {
        CONTROL_SPEC: [spec_line(approved.control)],
        SCOPE: list(approved.scope),
        SCOPE_RULE: [approved.scope_rule.text()] if approved.scope_rule else [],
        VERSION: [version_shown(lesson)],
        APPROVAL: ["APPROVED"],
    }


def draft_values(lesson: Lesson) -> PropertyValues:
    """Where a refused edit of a waiting draft puts the control back (its scope stays: that
    is the approver's to edit); a published lesson's go back to the version in force."""
    if lesson.revision is not None and lesson.state is LessonState.PENDING_APPROVAL:
        return {CONTROL_SPEC: [spec_line(lesson.control or {})]}
    values = in_force_values(lesson)
    return {key: values.get(key, []) for key in (CONTROL_SPEC, SCOPE, SCOPE_RULE)}


def on_version_edit(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    """Draft the edited control and scope as the next version, validated and backtested."""
    try:
        scope, rule = event_scope(change)
    except ScopeRuleError as error:
        return str(error)
    if refusal := scope_refusal(scope, rule):
        return refusal
    source = ctx.catalog.dataset(lesson.source_dataset) if lesson.source_dataset else None
    try:
        control = parse_steward_control(
            as_text(change.property_values(CONTROL_SPEC)),
            lesson.failure_pattern,
            source,
            ctx.catalog,
        )
    except ControlSpecError as error:
        return f"the edited control is not valid: {error}"
    revision = Revision(
        origin=f"edited by {change.actor}",
        requested_by=change.actor,
        at=change.time_ms,
        resume=_resume_state(lesson),
    )
    draft_revision(lesson, control_spec(control), revision)
    _draft(lesson, scope, rule, change, ctx)
    return None


def on_rollback(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    """Draft an earlier version's control and scope anew; approval republishes exactly them."""
    number = _version_number(change.property_values(VERSION))
    if lesson.approved is None:
        return "no version of this lesson was approved yet: there is nothing to roll back to"
    if lesson.state is LessonState.PENDING_APPROVAL and not _unfinished_draft(
        lesson, change, rollback=True
    ):
        return (
            f"version {lesson.next_version} is waiting for approval: approve or reject it "
            "before rolling back"
        )
    if number is None or not 1 <= number <= lesson.version_count:
        return f"reflex.version names no approved version: choose 1 to {lesson.version_count}"
    earlier = lesson.version(number)
    if earlier is None:
        return lesson.unkept_version(number)
    try:
        parse_control_spec(earlier.control)  # its control type may be gone since
    except ControlSpecError as error:
        return f"version {number}'s control cannot be used any more: {error}"
    revision = Revision(
        origin=f"rollback to version {number} by {change.actor}",
        requested_by=change.actor,
        at=change.time_ms,
        rollback_of=number,
        resume=_resume_state(lesson),
    )
    draft_revision(lesson, earlier.control, revision)
    _draft(lesson, earlier.scope, earlier.scope_rule, change, ctx)
    return None


def _resume_state(lesson: Lesson) -> Literal["PUBLISHED", "RETIRED"]:
    """Where a refused draft returns the lesson: where it was before the draft."""
    if lesson.revision is not None:
        return lesson.revision.resume
    return "RETIRED" if lesson.state is LessonState.RETIRED else "PUBLISHED"


def _draft(
    lesson: Lesson,
    scope: list[str],
    rule: ScopeRule | None,
    change: AspectChange,
    ctx: HandlerContext,
) -> None:
    number = lesson.next_version
    origin = lesson.revision.origin if lesson.revision else ""
    detail = f"{origin}; scope: {scope_words(scope, rule)}"
    lesson.record_decision(f"version {number} drafted", change.stamp, detail)
    propose(lesson, ctx, scope=scope, rule=rule)
    logger.info("lesson %s: version %d drafted (%s)", lesson.urn, number, origin)


def on_retired(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    """Withdraw every assertion and coverage of the lesson; its record stays readable."""
    if lesson.state is LessonState.RETIRED:
        return None
    if lesson.approved is None:
        return (
            "it was never published, so there is nothing to retire: reject it instead "
            "(reflex.approval or reflex.rootCauseStatus REJECTED)"
        )
    proposals, number = list(lesson.ownership_proposals), lesson.approved.number
    retire(lesson)
    start_rollout(lesson, Rollout(publish=None, withdraw=[number], phase="withdraw"))
    rollout = rollout_slice(lesson, ctx, {}, IN_DECISION)
    ctx.out.set_properties(lesson.urn, in_force_values(lesson))
    detail = f"version {number} withdrawn" + (
        f": {lesson.rollout.progress()}, the rest follows"
        if lesson.rollout is not None
        else f" from {plural(rollout.withdrawn if rollout else 0, 'dataset')}"
    )
    if proposals:  # no approval can apply them once retired: none waits
        for dataset in proposals:
            ctx.out.set_properties(dataset, {PROPOSED_OWNER: [], OWNERSHIP_CHANGE_APPROVAL: []})
        detail += "; owner proposals withdrawn on " + ", ".join(map(display_name, proposals))
    lesson.record_decision("retired", change.stamp, detail)
    ctx.out.save_lesson(lesson)
    logger.info("lesson %s retired by %s", lesson.urn, change.actor)
    return None


def refuse_draft(lesson: Lesson, change: AspectChange, verb: str, ctx: HandlerContext) -> None:
    """A drafted version is not approved: the lesson goes back to the version in force (or to
    retirement) exactly as it was, and its properties show that version again."""
    number = lesson.next_version
    refuse_revision(lesson)
    ctx.out.set_properties(lesson.urn, in_force_values(lesson))
    lesson.record_decision(f"version {number} {verb}", change.stamp)
    ctx.out.save_lesson(lesson)


def on_approval_rejected(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> None:
    if lesson.state is not LessonState.PENDING_APPROVAL:
        return
    if lesson.approved is not None:  # a new version refused: the one in force goes on
        refuse_draft(lesson, change, "rejected", ctx)
        return
    reject(lesson, APPROVAL)
    lesson.record_decision("scope rejected", change.stamp)
    ctx.out.save_lesson(lesson)
