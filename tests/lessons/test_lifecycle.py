"""The lesson's life (reflex_actions/lessons/lifecycle.py): every allowed move, and nothing else."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

import reflex_actions
from reflex_actions.lessons import lifecycle
from reflex_actions.lessons.lifecycle import TRANSITIONS, IllegalTransition, can_move, move
from reflex_actions.lessons.model import (
    KEPT_SKIPPED,
    ApprovedVersion,
    Lesson,
    LessonState,
    LogPosition,
    OwnershipProposal,
    ProposerInfo,
    Revision,
    Rollout,
)
from reflex_actions.patterns import UNKNOWN_PATTERN
from reflex_actions.vocabulary import APPROVAL, LIFECYCLE, ROOT_CAUSE_STATUS

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


# --- each move sets the data its state means (the mutation tests of issue 28 item 9) --------

CONTROL = {"type": "not_null", "field": "id"}
ORDERS = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.orders,PROD)"
ITEMS = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.items,PROD)"


def _version(number: int, scope: list[str], control: dict | None = None) -> ApprovedVersion:
    control = control or CONTROL
    return ApprovedVersion(
        control=control,
        scope=scope,
        actor="urn:li:corpuser:steward",
        at=1,
        digest=ApprovedVersion.digest_of(control, scope),
        number=number,
        published_scope=scope,
        report=f"report {number}",
        field_mappings={ORDERS: {"id": f"id{number}"}},
    )


def published_lesson(scope: list[str] | None = None, at_ms: int = 1_000) -> Lesson:
    """A lesson confirmed, proposed and published (version 1 on ``scope``)."""
    lesson = lesson_in(S.PROPOSED)
    lifecycle.confirm(lesson, failure_pattern="missing_values", root_cause="a loader",
                      control=CONTROL)  # fmt: skip
    version = _version(1, scope or [ORDERS])
    lifecycle.propose(lesson, backtest=None, report=version.report,
                      field_mappings=version.field_mappings)  # fmt: skip
    assert lifecycle.open_approval(lesson)
    lifecycle.publish(lesson, version, skipped=[], at_ms=at_ms)
    return lesson


def test_confirming_sets_the_confirmed_root_cause_and_clears_a_refusal() -> None:
    lesson = lesson_in(S.PROPOSED)
    lifecycle.refuse_confirmation(lesson, "the field is not a column")
    assert lesson.validation_error == "the field is not a column"
    assert lesson.state is S.PROPOSED
    lifecycle.confirm(lesson, failure_pattern="missing_values", root_cause="a loader",
                      control=CONTROL)  # fmt: skip
    assert lesson.state is S.CONFIRMED and lesson.validation_error is None
    assert (lesson.failure_pattern, lesson.root_cause, lesson.control) == (
        "missing_values", "a loader", CONTROL,
    )  # fmt: skip
    assert lesson.gate_values[ROOT_CAUSE_STATUS] == "CONFIRMED"


def test_a_failed_backtest_is_an_error_with_its_reason_and_the_gate_back_to_proposed() -> None:
    lesson = lesson_in(S.CONFIRMED)
    lesson.gate_values[ROOT_CAUSE_STATUS] = "CONFIRMED"
    lifecycle.fail(lesson, "no history")
    assert (lesson.state, lesson.error) == (S.ERROR, "no history")
    assert lesson.gate_values[ROOT_CAUSE_STATUS] == "PROPOSED"
    assert lifecycle.awaits_confirmation(lesson)


def test_proposing_waits_for_an_approval_that_is_not_open_yet() -> None:
    lesson = lesson_in(S.CONFIRMED)
    lesson.approval_open = True  # a stale flag: proposing closes it
    lifecycle.propose(lesson, backtest=None, report="the report",
                      field_mappings={ORDERS: {"id": "order_id"}})  # fmt: skip
    assert lesson.state is S.PENDING_APPROVAL
    assert (lesson.report, lesson.field_mappings) == ("the report", {ORDERS: {"id": "order_id"}})
    assert lesson.gate_values[APPROVAL] == "PENDING"
    assert lesson.approval_open is False
    assert not lifecycle.awaits_confirmation(lesson)


def test_an_approval_opens_once_and_only_while_pending() -> None:
    assert lifecycle.open_approval(lesson_in(S.CONFIRMED)) is False
    lesson = lesson_in(S.PENDING_APPROVAL)
    assert lifecycle.open_approval(lesson) is True and lesson.approval_open
    assert lifecycle.open_approval(lesson) is False and lesson.approval_open


def test_only_an_open_approval_publishes() -> None:
    lesson = lesson_in(S.PENDING_APPROVAL)
    with pytest.raises(IllegalTransition, match="not open for approval"):
        lifecycle.publish(lesson, _version(1, [ORDERS]), skipped=[], at_ms=5)
    assert lesson.state is S.PENDING_APPROVAL and lesson.versions == []


def test_publishing_puts_the_version_in_force_from_the_first_approval_on() -> None:
    lesson = published_lesson([ORDERS, ITEMS], at_ms=1_000)
    assert lesson.state is S.PUBLISHED and lesson.in_force_since == 1_000
    assert lesson.published_scope == [ORDERS, ITEMS] and lesson.publish_skipped == []
    assert lesson.approved == lesson.versions[-1] and lesson.revision is None
    assert (lesson.gate_values[APPROVAL], lesson.gate_values[LIFECYCLE]) == ("APPROVED", "ACTIVE")
    revision = Revision(origin="edited", requested_by=None, at=2)
    lifecycle.draft_revision(lesson, {"type": "not_null", "field": "id2"}, revision)
    assert lesson.revision == revision and lesson.control == {"type": "not_null", "field": "id2"}
    lifecycle.propose(lesson, backtest=None, report="report 2", field_mappings={})
    lifecycle.open_approval(lesson)
    lifecycle.publish(lesson, _version(2, [ORDERS]), skipped=["why"], at_ms=9_000)
    assert lesson.in_force_since == 1_000  # in force since the first approval, not the latest
    assert lesson.publish_skipped == ["why"] and lesson.published_scope == [ORDERS]
    assert [v.number for v in lesson.versions] == [1, 2] and lesson.revision is None


def test_a_draft_needs_a_version_in_force_or_retired() -> None:
    revision = Revision(origin="edited", requested_by=None, at=2)
    with pytest.raises(IllegalTransition, match="cannot draft a new version from PROPOSED"):
        lifecycle.draft_revision(lesson_in(S.PROPOSED), CONTROL, revision)
    rejected = published_lesson()
    rejected.state = S.REJECTED  # (never so in life: a rejected lesson drafts nothing)
    with pytest.raises(IllegalTransition, match="from REJECTED"):
        lifecycle.draft_revision(rejected, CONTROL, revision)


def test_a_refused_draft_puts_the_version_in_force_back_exactly() -> None:
    lesson = published_lesson()
    before = lesson.model_dump()
    revision = Revision(origin="edited", requested_by=None, at=2)
    lifecycle.draft_revision(lesson, {"type": "not_null", "field": "id2"}, revision)
    lifecycle.propose(lesson, backtest=None, report="report 2", field_mappings={ITEMS: {}})
    lifecycle.open_approval(lesson)
    lifecycle.refuse_revision(lesson)
    assert lesson.model_dump() == before
    with pytest.raises(IllegalTransition, match="no drafted version to refuse"):
        lifecycle.refuse_revision(lesson)


def test_a_refused_draft_after_retirement_goes_back_to_retired() -> None:
    lesson = published_lesson()
    lifecycle.retire(lesson)
    revision = Revision(origin="rollback", requested_by=None, at=3, rollback_of=1,
                        resume="RETIRED")  # fmt: skip
    lifecycle.draft_revision(lesson, CONTROL, revision)
    lifecycle.propose(lesson, backtest=None, report="again", field_mappings={})
    lifecycle.refuse_revision(lesson)
    assert lesson.state is S.RETIRED and lesson.revision is None
    assert lesson.gate_values[APPROVAL] == "APPROVED" and lesson.report == "report 1"


def test_retiring_withdraws_the_scope_and_drops_a_waiting_draft_and_owner_proposals() -> None:
    lesson = published_lesson()
    lifecycle.propose_owner(lesson, ORDERS, OwnershipProposal(
        owner="urn:li:corpuser:ann", type="TECHNICAL_OWNER", reason="r", incident="i"))  # fmt: skip
    lifecycle.draft_revision(lesson, {"type": "not_null", "field": "id2"},
                             Revision(origin="edited", requested_by=None, at=2))  # fmt: skip
    lifecycle.propose(lesson, backtest=None, report="report 2", field_mappings={})
    lifecycle.retire(lesson)
    assert lesson.state is S.RETIRED and lesson.revision is None
    assert lesson.control == CONTROL and lesson.report == "report 1"
    assert (lesson.published_scope, lesson.in_force_since) == ([], None)
    assert lesson.gate_values[LIFECYCLE] == "RETIRED" and lesson.ownership_proposals == {}
    with pytest.raises(IllegalTransition):
        lifecycle.retire(lesson_in(S.PROPOSED))


def test_rejecting_is_final_and_marks_the_gate() -> None:
    lesson = lesson_in(S.PENDING_APPROVAL)
    lifecycle.reject(lesson, APPROVAL)
    assert lesson.state is S.REJECTED and lesson.gate_values[APPROVAL] == "REJECTED"


def test_owner_proposals_wait_per_dataset_until_decided() -> None:
    lesson = lesson_in(S.PUBLISHED)
    proposal = OwnershipProposal(owner="o", type="t", reason="r", incident="i")
    lifecycle.propose_owner(lesson, ORDERS, proposal)
    lifecycle.propose_owner(lesson, ITEMS, proposal)
    lifecycle.owner_decided(lesson, ORDERS)
    assert lesson.ownership_proposals == {ITEMS: proposal}


def test_the_latest_decision_is_kept_and_dates_are_taken_as_failures() -> None:
    lesson = lesson_in(S.PROPOSED)
    here = LogPosition(stream="s", offset=7)
    lifecycle.judged_at(lesson, here)
    lifecycle.judged_at(lesson, None)
    assert lesson.judged == here
    lifecycle.drafted_on(lesson, ["2026-09-14"])
    assert lesson.dated_failures == ["2026-09-14"]


def test_a_new_rollout_withdraws_what_an_unfinished_one_still_had_to() -> None:
    lesson = published_lesson()
    lesson.publish_skipped = ["an earlier reason"]
    lifecycle.start_rollout(lesson, Rollout(publish=2, withdraw=[1]))
    assert lesson.rollout == Rollout(publish=2, withdraw=[1]) and lesson.publish_skipped == []
    lifecycle.start_rollout(lesson, Rollout(publish=3, withdraw=[4]))
    assert lesson.rollout == Rollout(publish=3, withdraw=[1, 2, 4])
    lesson.publish_skipped = ["kept"]
    lifecycle.start_rollout(lesson, Rollout(publish=None, withdraw=[]))  # retired: withdrawing
    assert lesson.rollout == Rollout(publish=None, withdraw=[1, 2, 3, 4])
    assert lesson.publish_skipped == ["kept"]


def test_each_slice_adds_to_the_rollout_and_drops_the_skipped_from_the_version() -> None:
    lesson = published_lesson([ORDERS, ITEMS])
    with pytest.raises(IllegalTransition, match="no rollout under way"):
        lifecycle.rolled_out(lesson, after=ORDERS, published=1, skipped={}, withdrawn=0)
    lifecycle.start_rollout(lesson, Rollout(publish=1, published=2, skipped=1, withdrawn=3))
    lifecycle.rolled_out(lesson, after=ORDERS, published=4, skipped={ITEMS: "no column"},
                         withdrawn=5)  # fmt: skip
    assert lesson.rollout == Rollout(publish=1, after=ORDERS, published=6, skipped=2, withdrawn=8)
    assert lesson.publish_skipped == ["no column"]
    assert lesson.published_scope == [ORDERS]
    assert lesson.approved.published_scope == [ORDERS] == lesson.versions[-1].published_scope


def test_a_slice_of_another_version_leaves_the_version_in_force_alone() -> None:
    lesson = published_lesson([ORDERS, ITEMS])
    lifecycle.start_rollout(lesson, Rollout(publish=2))
    lifecycle.rolled_out(lesson, after=ITEMS, published=0, skipped={ITEMS: "x"}, withdrawn=0)
    assert lesson.published_scope == [ORDERS, ITEMS]
    assert lesson.approved.published_scope == [ORDERS, ITEMS]


def test_the_reasons_skipped_are_kept_up_to_their_bound() -> None:
    lesson = published_lesson()
    lifecycle.start_rollout(lesson, Rollout(publish=1))
    many = {f"urn:{i}": f"reason {i}" for i in range(KEPT_SKIPPED + 5)}
    lifecycle.rolled_out(lesson, after="urn:9", published=0, skipped=many, withdrawn=0)
    assert lesson.publish_skipped == [f"reason {i}" for i in range(KEPT_SKIPPED)]
    lifecycle.rolled_out(lesson, after="urn:99", published=0, skipped={"urn:x": "more"},
                         withdrawn=0)  # fmt: skip
    assert len(lesson.publish_skipped) == KEPT_SKIPPED


def test_a_rollout_publishes_then_withdraws_then_records_where_the_version_went() -> None:
    lesson = published_lesson()
    with pytest.raises(IllegalTransition):
        lifecycle.rollout_phase_done(lesson)
    lifecycle.start_rollout(lesson, Rollout(publish=1, withdraw=[7], after=ORDERS, published=3))
    lifecycle.rollout_phase_done(lesson)
    assert lesson.rollout == Rollout(publish=1, withdraw=[7], phase="withdraw", after="",
                                     published=3)  # fmt: skip
    assert lesson.approved.published_count == 0
    lifecycle.rollout_phase_done(lesson)
    assert lesson.rollout is None
    assert lesson.approved.published_count == 3 == lesson.versions[-1].published_count


def test_a_rollout_with_nothing_to_withdraw_ends_with_its_publishing() -> None:
    lesson = published_lesson()
    lifecycle.start_rollout(lesson, Rollout(publish=1, published=2))
    lifecycle.rollout_phase_done(lesson)
    assert lesson.rollout is None and lesson.approved.published_count == 2


def test_a_withdrawing_rollout_leaves_the_versions_count_alone() -> None:
    lesson = published_lesson()
    lifecycle.start_rollout(lesson, Rollout(publish=None, published=2))
    lifecycle.rollout_phase_done(lesson)
    assert lesson.rollout is None and lesson.approved.published_count == 0


def test_a_refused_draft_that_cannot_resume_changes_nothing() -> None:
    """A draft made after retirement that would resume PUBLISHED: refusing it is illegal, and
    refused before the draft is dropped."""
    lesson = published_lesson()
    lifecycle.retire(lesson)
    lifecycle.draft_revision(lesson, {"type": "not_null", "field": "id2"},
                             Revision(origin="edited", requested_by=None, at=3))  # fmt: skip
    before = lesson.model_dump()
    with pytest.raises(IllegalTransition, match="from RETIRED to PUBLISHED"):
        lifecycle.refuse_revision(lesson)
    assert lesson.model_dump() == before


def test_retiring_a_rejected_lesson_changes_nothing_not_even_its_draft() -> None:
    lesson = published_lesson()
    lifecycle.draft_revision(lesson, {"type": "not_null", "field": "id2"},
                             Revision(origin="edited", requested_by=None, at=2))  # fmt: skip
    lifecycle.propose(lesson, backtest=None, report="report 2", field_mappings={})
    lifecycle.reject(lesson, APPROVAL)
    before = lesson.model_dump()
    with pytest.raises(IllegalTransition, match="from REJECTED to RETIRED"):
        lifecycle.retire(lesson)
    assert lesson.model_dump() == before


def test_no_reason_skipped_is_kept_beyond_the_bound_whatever_was_kept_before() -> None:
    lesson = published_lesson()
    lifecycle.start_rollout(lesson, Rollout(publish=1))
    lesson.publish_skipped = [f"earlier {i}" for i in range(KEPT_SKIPPED + 1)]
    lifecycle.rolled_out(lesson, after="urn:2", published=0, skipped={"urn:1": "a", "urn:2": "b"},
                         withdrawn=0)  # fmt: skip
    assert lesson.publish_skipped == [f"earlier {i}" for i in range(KEPT_SKIPPED + 1)]
