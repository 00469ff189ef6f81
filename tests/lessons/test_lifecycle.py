"""The lesson's life (reflex_actions/lessons/lifecycle.py): every allowed move, and nothing else."""

from __future__ import annotations

import ast
import itertools
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


#: calls that change a list or dict in place
MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault"}


def _lesson_field(node: ast.expr) -> str | None:
    """``lesson.<field>`` (or ``x.lesson.<field>[...]``) naming a Lesson field: its name."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if (
        isinstance(node, ast.Attribute)
        and node.attr in Lesson.model_fields
        and "lesson" in ast.unparse(node.value).lower()
    ):
        return node.attr
    return None


def _writes_to_a_lesson(tree: ast.AST) -> list[tuple[int, str]]:
    writes = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
        ):
            targets = [node.func.value]
        for target in targets:
            for each in target.elts if isinstance(target, ast.Tuple) else [target]:
                if (name := _lesson_field(each)) is not None:
                    writes.append((node.lineno, name))
    return sorted(writes)


def test_nothing_outside_lessons_assigns_a_lesson_field() -> None:
    """A lesson's fields change only through ``lessons/`` (a lifecycle move, or a method of the
    lesson), so a state never goes without the data that make it that state."""
    package = Path(reflex_actions.__file__).parent
    offenders = [
        f"{path.relative_to(package)}:{line} ({name})"
        for path in sorted(package.rglob("*.py"))
        if "lessons" not in path.relative_to(package).parts
        for line, name in _writes_to_a_lesson(ast.parse(path.read_text()))
    ]
    assert offenders == []


def test_the_guard_sees_each_way_of_writing_a_field() -> None:
    written = _writes_to_a_lesson(
        ast.parse(
            "lesson.state = x\n"
            "lesson.gate_values[k] = v\n"
            "a, covered.lesson.report = 1, 2\n"
            "lesson.versions.append(v)\n"
            "lesson.older_recurrences += 1\n"
            "del lesson.ownership_proposals[k]\n"
            "other.state = x\n"
            "lesson.urn.split(':')\n"
        )
    )
    assert [name for _, name in written] == [
        "state", "gate_values", "report", "versions", "older_recurrences", "ownership_proposals",
    ]  # fmt: skip
