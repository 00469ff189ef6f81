"""Random walks through the lesson's life (hypothesis): whatever legal moves are made in
whatever order, the lesson's state and its data agree, and a refused move changes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflex_actions.lessons import lifecycle
from reflex_actions.lessons.lifecycle import IllegalTransition
from reflex_actions.lessons.model import ApprovedVersion, Lesson, LessonState, Revision
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.lessons.test_lifecycle import lesson_in

S = LessonState
CONTROL = {"type": "not_null", "field": "id"}
SCOPE = ["urn:li:dataset:(urn:li:dataPlatform:postgres,shop.orders,PROD)"]


def _publish(lesson: Lesson) -> None:
    version = ApprovedVersion(
        control=lesson.control or CONTROL,
        scope=SCOPE,
        actor="urn:li:corpuser:steward",
        at=1,
        digest=ApprovedVersion.digest_of(lesson.control or CONTROL, SCOPE),
        number=lesson.next_version,
        published_scope=SCOPE,
    )
    lifecycle.publish(lesson, version, skipped=[], at_ms=1_000 + len(lesson.versions))


def _draft(lesson: Lesson) -> None:
    """An edit or a rollback: the draft, then its backtest (the two are one decision)."""
    resume = "RETIRED" if lesson.state is S.RETIRED else "PUBLISHED"
    if lesson.revision is not None:
        resume = lesson.revision.resume
    revision = Revision(
        origin="edited", requested_by="urn:li:corpuser:steward", at=2, resume=resume
    )
    lifecycle.draft_revision(lesson, {"type": "not_null", "field": "id2"}, revision)
    lifecycle.propose(lesson, backtest=None, report="the draft's report", field_mappings={})


MOVES: dict[str, Callable[[Lesson], object]] = {
    "confirm": lambda x: lifecycle.confirm(
        x, failure_pattern="missing_values", root_cause="a loader", control=CONTROL
    ),
    "fail": lambda x: lifecycle.fail(x, "no history"),
    "propose": lambda x: lifecycle.propose(x, backtest=None, report="r", field_mappings={}),
    "open approval": lifecycle.open_approval,
    "publish": _publish,
    "draft": _draft,
    "refuse the draft": lifecycle.refuse_revision,
    "retire": lifecycle.retire,
    "reject the root cause": lambda x: lifecycle.reject(x, ROOT_CAUSE_STATUS),
    "reject the scope": lambda x: lifecycle.reject(x, APPROVAL),
}


def check_invariants(lesson: Lesson) -> None:
    in_force = lesson.state is S.PUBLISHED or (
        lesson.state is S.PENDING_APPROVAL
        and lesson.revision is not None
        and lesson.revision.resume == "PUBLISHED"
    )
    assert in_force == (lesson.in_force_since is not None) == lesson.in_force
    assert not lesson.approval_open or lesson.state is S.PENDING_APPROVAL
    assert lesson.revision is None or lesson.state is S.PENDING_APPROVAL
    assert (lesson.state is S.ERROR) == (lesson.error is not None)
    assert (lesson.approved is None) == (lesson.versions == [])
    assert lesson.approved is None or lesson.approved == lesson.versions[-1]
    if lesson.state is S.PUBLISHED:
        assert lesson.gate_values[APPROVAL] == "APPROVED"
        assert lesson.published_scope == lesson.approved.published_scope  # type: ignore[union-attr]
    if lesson.state is S.RETIRED:
        assert lesson.published_scope == [] and lesson.ownership_proposals == {}
    if lesson.revision is None and lesson.approved is not None:
        assert lesson.control == lesson.approved.control  # no draft: the version in force


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(sorted(MOVES)), max_size=40))
def test_any_walk_keeps_the_state_and_its_data_together(walk: list[str]) -> None:
    lesson = lesson_in(S.PROPOSED)
    reached = {lesson.state}
    for name in walk:
        before = lesson.model_dump()
        try:
            MOVES[name](lesson)
        except IllegalTransition:
            assert lesson.model_dump() == before  # a refused move changes nothing
        check_invariants(lesson)
        reached.add(lesson.state)
    if S.REJECTED in reached:
        assert lesson.state is S.REJECTED  # final


def test_a_walk_through_every_state_is_legal() -> None:
    """The walk a lesson takes in the demo, and beyond: each move taken, each state reached."""
    lesson = lesson_in(S.PROPOSED)
    for name in ["confirm", "fail", "confirm", "propose", "open approval", "publish", "draft",
                 "refuse the draft", "draft", "open approval", "publish", "retire", "draft",
                 "open approval", "publish", "retire"]:  # fmt: skip
        MOVES[name](lesson)
        check_invariants(lesson)
    assert lesson.state is S.RETIRED and [v.number for v in lesson.versions] == [1, 2, 3]


def test_a_published_lesson_is_proposed_again_only_as_a_drafted_revision() -> None:
    """Found by the walk above: proposing a published lesson with no draft left it waiting for
    approval with nothing drafted, yet in force."""
    lesson = lesson_in(S.PROPOSED)
    for name in ("confirm", "propose", "open approval", "publish"):
        MOVES[name](lesson)
    before = lesson.model_dump()
    with pytest.raises(IllegalTransition, match="only a drafted revision is proposed"):
        MOVES["propose"](lesson)
    assert lesson.model_dump() == before
    MOVES["draft"](lesson)
    assert lesson.state is S.PENDING_APPROVAL and lesson.in_force
