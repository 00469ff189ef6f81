"""The lesson's life: every state it can be in and every move between them, in one place.

Handlers ask :func:`move` instead of assigning ``lesson.state``: a move the table does not allow
is a bug or a race, and it raises instead of leaving a lesson somewhere it cannot leave.
"""

from __future__ import annotations

from reflex_actions.errors import ReflexError
from reflex_actions.lessons.model import Lesson, LessonState

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


def move(lesson: Lesson, to: LessonState, error: str | None = None) -> None:
    """Move the lesson to ``to``; ERROR needs the reason, which its page shows."""
    if not can_move(lesson, to):
        raise IllegalTransition(
            f"lesson {lesson.urn} cannot go from {lesson.state.value} to {to.value}"
        )
    if (to is ERR) != (error is not None):
        raise ValueError("a lesson is in ERROR exactly when it says why")
    lesson.state = to
    lesson.error = error


def awaits_confirmation(lesson: Lesson) -> bool:
    """Whether a confirmation is a decision on it now (drafted, or stuck and retried)."""
    return lesson.state in (P, ERR)
