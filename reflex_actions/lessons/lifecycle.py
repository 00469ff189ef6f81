"""The lesson's life: every state it can be in and every move between them, in one place.

Handlers make a named move (:func:`confirm`, :func:`propose`, :func:`publish`, ...) instead of
assigning the lesson's fields: each checks the transition table and sets the state and the data
that go with it together, so a lesson is never in a state without what that state means (in
force with no ``in_force_since``, an approval open outside PENDING_APPROVAL, a draft after it
was refused). A move the table does not allow is a bug or a race: it raises instead of leaving
a lesson somewhere it cannot leave.
"""

from __future__ import annotations

from typing import Any

from reflex_actions.errors import ReflexError
from reflex_actions.lessons.model import (
    KEPT_SKIPPED,
    ApprovedVersion,
    BacktestSummary,
    Lesson,
    LessonState,
    LogPosition,
    OwnershipProposal,
    Revision,
    Rollout,
)
from reflex_actions.vocabulary import APPROVAL, LIFECYCLE, ROOT_CAUSE_STATUS

P, C, PA, PUB, RET, REJ, ERR = (
    LessonState.PROPOSED,
    LessonState.CONFIRMED,
    LessonState.PENDING_APPROVAL,
    LessonState.PUBLISHED,
    LessonState.RETIRED,
    LessonState.REJECTED,
    LessonState.ERROR,
)

#: state -> the states it may move to (staying where it is is always allowed: redeliveries)
TRANSITIONS: dict[LessonState, frozenset[LessonState]] = {
    P: frozenset({C, REJ}),  # gate 1: confirmed (validated) or rejected
    C: frozenset({PA, ERR, REJ}),  # backtested and waiting for approval, or it could not be
    # gate 2: published, or the scope (or root cause) rejected; a new version's draft refused
    # goes back to where it came from (published or retired), and may be retired meanwhile
    PA: frozenset({PUB, ERR, REJ, RET}),
    PUB: frozenset({PA, RET}),  # a new version drafted (an edit, a rollback), or retired
    RET: frozenset({PA}),  # a rollback drafts an earlier version anew, through gate 2
    REJ: frozenset(),  # final: nothing is ever published from a rejected lesson
    ERR: frozenset({C, REJ}),  # a new confirmation validates and retries; or give up
}


class IllegalTransition(ReflexError):
    """A move the lesson's life does not allow."""


def can_move(lesson: Lesson, to: LessonState) -> bool:
    return to is lesson.state or to in TRANSITIONS[lesson.state]


def _check(lesson: Lesson, to: LessonState) -> None:
    if not can_move(lesson, to):
        raise IllegalTransition(
            f"lesson {lesson.urn} cannot go from {lesson.state.value} to {to.value}"
        )


def move(lesson: Lesson, to: LessonState, error: str | None = None) -> None:
    """Move the lesson to ``to``; ERROR needs the reason, which its page shows."""
    _check(lesson, to)
    if (to is ERR) != (error is not None):
        raise ValueError("a lesson is in ERROR exactly when it says why")
    lesson.state = to
    lesson.error = error
    if to is not PA:  # an approval is open only while the lesson waits for one
        lesson.approval_open = False


def confirm(
    lesson: Lesson, *, failure_pattern: str, root_cause: str, control: dict[str, Any]
) -> None:
    """Gate 1 passed: the root cause and control as the steward confirmed them."""
    move(lesson, C)
    lesson.failure_pattern, lesson.root_cause, lesson.control = failure_pattern, root_cause, control
    lesson.validation_error = None
    lesson.gate_values[ROOT_CAUSE_STATUS] = "CONFIRMED"


def refuse_confirmation(lesson: Lesson, reason: str) -> None:
    """A confirmation whose edit is invalid: the lesson stays where it is, the reason shown."""
    lesson.validation_error = reason


def fail(lesson: Lesson, reason: str) -> None:
    """The confirmed control could not be backtested: ERROR with the reason, and the gate back
    to PROPOSED, so confirming again is a transition."""
    move(lesson, ERR, error=reason)
    lesson.gate_values[ROOT_CAUSE_STATUS] = "PROPOSED"


def propose(
    lesson: Lesson,
    *,
    backtest: BacktestSummary | None,
    report: str,
    field_mappings: dict[str, dict[str, str]],
) -> None:
    """Backtested and reported: waiting for approval, which opens only once Reflex's own
    PENDING is seen in the event log (:func:`open_approval`). A lesson with an approved
    version is proposed again only as a drafted revision (:func:`draft_revision`)."""
    if lesson.approved is not None and lesson.revision is None:
        raise IllegalTransition(
            f"lesson {lesson.urn} has an approved version: only a drafted revision is proposed"
        )
    move(lesson, PA)
    lesson.backtest, lesson.report, lesson.field_mappings = backtest, report, field_mappings
    lesson.gate_values[APPROVAL] = "PENDING"
    lesson.approval_open = False


def open_approval(lesson: Lesson) -> bool:
    """Reflex's PENDING reached the log after the report: an approval from here on decides on
    a report that exists. True when it was not open yet."""
    if lesson.state is not PA or lesson.approval_open:
        return False
    lesson.approval_open = True
    return True


def publish(lesson: Lesson, version: ApprovedVersion, *, skipped: list[str], at_ms: int) -> None:
    """Gate 2 passed: ``version`` is in force on the datasets it was published on. Only an
    open approval publishes: one written before the report existed decided on nothing."""
    if not lesson.approval_open:
        raise IllegalTransition(f"lesson {lesson.urn} is not open for approval")
    move(lesson, PUB)
    lesson.published_scope, lesson.publish_skipped = list(version.published_scope), skipped
    lesson.versions.append(version)
    lesson.approved, lesson.revision = version, None
    if lesson.in_force_since is None:
        lesson.in_force_since = at_ms
    lesson.gate_values.update({APPROVAL: "APPROVED", LIFECYCLE: "ACTIVE"})


def start_rollout(lesson: Lesson, rollout: Rollout) -> None:
    """Its version goes out (or, once retired, its datasets are withdrawn) slice by slice
    from here; what an unfinished rollout still had to withdraw, this one withdraws too."""
    if (unfinished := lesson.rollout) is not None:
        pending = {*unfinished.withdraw, unfinished.publish} - {None, rollout.publish}
        rollout = rollout.model_copy(
            update={"withdraw": sorted({*rollout.withdraw, *pending})}  # type: ignore[arg-type]
        )
    lesson.rollout = rollout
    if rollout.publish is not None:
        lesson.publish_skipped = []


def rolled_out(
    lesson: Lesson, *, after: str, published: int, skipped: dict[str, str], withdrawn: int
) -> None:
    """One slice of the rollout done, up to the dataset ``after``: the version is on
    ``published`` more datasets, not on the ``skipped`` ones (urn -> why; the first reasons
    kept, and a listed scope's record no longer names them), and off ``withdrawn`` more."""
    rollout = _rolling(lesson)
    lesson.rollout = rollout.model_copy(
        update={
            "after": after,
            "published": rollout.published + published,
            "skipped": rollout.skipped + len(skipped),
            "withdrawn": rollout.withdrawn + withdrawn,
        }
    )
    reasons = list(skipped.values())
    lesson.publish_skipped += reasons[: max(0, KEPT_SKIPPED - len(lesson.publish_skipped))]
    approved = lesson.approved
    if skipped and approved is not None and approved.number == rollout.publish:
        lesson.published_scope = [u for u in lesson.published_scope if u not in skipped]
        _update_approved(lesson, published_scope=lesson.published_scope)


def rollout_phase_done(lesson: Lesson) -> None:
    """The rollout's publishing is done: next, withdrawing what it no longer covers; or,
    that done too, the rollout is over and the version records where it went."""
    rollout = _rolling(lesson)
    if rollout.phase == "publish" and rollout.withdraw:
        lesson.rollout = rollout.model_copy(update={"phase": "withdraw", "after": ""})
        return
    lesson.rollout = None
    approved = lesson.approved
    if approved is not None and approved.number == rollout.publish:
        _update_approved(lesson, published_count=rollout.published)


def _rolling(lesson: Lesson) -> Rollout:
    if lesson.rollout is None:
        raise IllegalTransition(f"lesson {lesson.urn} has no rollout under way")
    return lesson.rollout


def _update_approved(lesson: Lesson, **update: Any) -> None:
    """The version in force, and its entry in the list of versions, with ``update``."""
    approved = lesson.approved
    assert approved is not None
    lesson.approved = approved.model_copy(update=update)
    lesson.versions = [
        lesson.approved if v.number == approved.number else v for v in lesson.versions
    ]


def draft_revision(lesson: Lesson, control: dict[str, Any], revision: Revision) -> None:
    """A new version drafted (an edit, a rollback) while the one in force runs, or after
    retirement; it is backtested next (:func:`propose`)."""
    if lesson.approved is None or not can_move(lesson, PA):
        raise IllegalTransition(
            f"lesson {lesson.urn} cannot draft a new version from {lesson.state.value}"
        )
    lesson.control, lesson.revision = control, revision


def refuse_revision(lesson: Lesson) -> None:
    """The drafted version is not approved: back to the version in force (or to retirement)
    exactly as it was."""
    if lesson.revision is None:
        raise IllegalTransition(f"lesson {lesson.urn} has no drafted version to refuse")
    resume = LessonState(lesson.revision.resume)
    _check(lesson, resume)
    _drop_draft(lesson)
    move(lesson, resume)


def retire(lesson: Lesson) -> None:
    """None of its controls run any more; its record stays, and no owner proposal waits."""
    _check(lesson, RET)
    _drop_draft(lesson)
    move(lesson, RET)
    lesson.published_scope, lesson.in_force_since = [], None
    lesson.gate_values[LIFECYCLE] = "RETIRED"
    lesson.ownership_proposals = {}


def reject(lesson: Lesson, gate: str) -> None:
    """Rejected at ``gate`` (the root cause's or the approval's): final."""
    move(lesson, REJ)
    lesson.gate_values[gate] = "REJECTED"


def _drop_draft(lesson: Lesson) -> None:
    """Put the version in force back in place of a draft, if one was waiting."""
    approved = lesson.approved
    if approved is None or lesson.revision is None:
        return
    lesson.control, lesson.report = approved.control, approved.report
    lesson.field_mappings, lesson.backtest = approved.field_mappings, approved.backtest
    lesson.revision, lesson.approval_open = None, False
    lesson.gate_values[APPROVAL] = "APPROVED"


def judged_at(lesson: Lesson, position: LogPosition | None) -> None:
    """The latest event that made a decision on the lesson is here in the log."""
    lesson.judged = position or lesson.judged


def propose_owner(lesson: Lesson, dataset_urn: str, proposal: OwnershipProposal) -> None:
    """An owner change waits for approval on ``dataset_urn``."""
    lesson.ownership_proposals[dataset_urn] = proposal


def owner_decided(lesson: Lesson, dataset_urn: str) -> None:
    """The owner change on ``dataset_urn`` was approved or rejected: none waits there."""
    del lesson.ownership_proposals[dataset_urn]


def drafted_on(lesson: Lesson, dated_failures: list[str]) -> None:
    """The source's snapshots the incident's dates point at, taken as its failures."""
    lesson.dated_failures = dated_failures


def awaits_confirmation(lesson: Lesson) -> bool:
    """Whether a confirmation is a decision on it now (drafted, or stuck and retried)."""
    return lesson.state in (P, ERR)
