"""The lesson's life (reflex_actions/lessons/lifecycle.py): every allowed move, and nothing else."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import reflex_actions
from reflex_actions.lessons.lifecycle import TRANSITIONS, IllegalTransition, can_move, move
from reflex_actions.lessons.model import Lesson, LessonState, ProposerInfo
from reflex_actions.patterns import UNKNOWN_PATTERN

S = LessonState
ALLOWED = {
    (S.PROPOSED, S.CONFIRMED),
    (S.PROPOSED, S.REJECTED),
    (S.CONFIRMED, S.PENDING_APPROVAL),
    (S.CONFIRMED, S.ERROR),
    (S.CONFIRMED, S.REJECTED),
    (S.PENDING_APPROVAL, S.PUBLISHED),
    (S.PENDING_APPROVAL, S.ERROR),
    (S.PENDING_APPROVAL, S.REJECTED),
    (S.PENDING_APPROVAL, S.RETIRED),  # retired while a new version waits
    (S.PUBLISHED, S.PENDING_APPROVAL),  # a new version drafted: an edit or a rollback
    (S.PUBLISHED, S.RETIRED),
    (S.RETIRED, S.PENDING_APPROVAL),  # a rollback, through approval again
    (S.ERROR, S.CONFIRMED),
    (S.ERROR, S.REJECTED),
}


def lesson_in(state: LessonState) -> Lesson:
    return Lesson(
        urn="urn:li:glossaryTerm:reflex.lesson.x",
        incident="urn:li:incident:x",
        source_dataset=None,
        affected_assets=[],
        failure_pattern=UNKNOWN_PATTERN,
        root_cause="r",
        evidence=[],
        control=None,
        confidence=0.5,
        rationale="",
        proposer=ProposerInfo(name="deterministic"),
        state=state,
        error="stuck" if state is S.ERROR else None,
    )


def test_every_state_has_its_moves_listed() -> None:
    assert set(TRANSITIONS) == set(LessonState)
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == ALLOWED


@pytest.mark.parametrize(("start", "end"), list(itertools.product(LessonState, LessonState)))
def test_only_the_listed_moves_are_allowed(start: LessonState, end: LessonState) -> None:
    lesson = lesson_in(start)
    error = "why" if end is S.ERROR else None
    if start is end or (start, end) in ALLOWED:
        move(lesson, end, error=error)
        assert (lesson.state, lesson.error) == (end, error)
    else:
        assert not can_move(lesson, end)
        with pytest.raises(IllegalTransition, match=f"from {start.value} to {end.value}"):
            move(lesson, end, error=error)
        assert lesson.state is start


def test_a_lesson_is_in_error_exactly_when_it_says_why() -> None:
    with pytest.raises(ValueError, match="says why"):
        move(lesson_in(S.CONFIRMED), S.ERROR)
    with pytest.raises(ValueError, match="says why"):
        move(lesson_in(S.PROPOSED), S.CONFIRMED, error="no")
    stuck = lesson_in(S.ERROR)
    move(stuck, S.CONFIRMED)
    assert stuck.error is None


def test_handlers_never_assign_a_state_themselves() -> None:
    folder = Path(reflex_actions.__file__).parent / "handlers"
    assigning = re.compile(r"\.state\s*=[^=]")
    offenders = [
        f"{path.name}:{number}"
        for path in sorted(folder.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if assigning.search(line)
    ]
    assert offenders == []
