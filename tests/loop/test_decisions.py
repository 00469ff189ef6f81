"""Decisions bind to what was decided (DESIGN §9), on the embedded loop through the real pipeline.

A decision acts on the values of its own event; only Reflex's PENDING in the log opens
approval; a refused decision is put back and written on the lesson page; a membership the
member wrote proves nothing; a published lesson records a digest of what was approved.
"""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    GlossaryTermInfoClass,
    GroupMembershipClass,
    NativeGroupMembershipClass,
    _Aspect,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import HR_ADMIN, INTRUDER, STEWARD, Demo
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import ApprovedVersion, LessonState
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, COVERAGE, ROOT_CAUSE_STATUS, SCOPE
from tests.loop.store import (
    all_rows,
    latest,
    property_values,
    replay_from_start,
    store_of,
    stored_lesson,
    urns_with,
)

LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
REFUNDS = dataset_urn("finance.refunds")
APPROVER_GROUP = "urn:li:corpGroup:finance-stewards"
ZOE = user_urn("zoe")


def _asserted(demo: Demo) -> set[str]:
    store = store_of(demo.workdir)
    infos = [latest(store, urn, AssertionInfoClass) for urn in urns_with(store, "assertionInfo")]
    return {info.customAssertion.entity for info in infos if info and info.customAssertion}


def _page(demo: Demo) -> str:
    info = latest(store_of(demo.workdir), LESSON, GlossaryTermInfoClass)
    assert info is not None
    return info.definition


def test_an_approval_publishes_the_scope_and_control_its_own_event_carried(
    pending: Demo,
) -> None:
    """Between the steward's APPROVED and its handling, someone widens the scope and loosens
    the control: what is published is what the steward approved."""
    approved_scope = [str(u) for u in property_values(store_of(pending.workdir), LESSON, SCOPE)]
    assert REFUNDS not in approved_scope
    pending.catalog.set_structured_properties(LESSON, {APPROVAL: ["APPROVED"]}, STEWARD)
    pending.catalog.set_structured_properties(
        LESSON,
        {
            SCOPE: [*approved_scope, REFUNDS],
            CONTROL_SPEC: ["{type: uniqueness, field: transaction_id, max_duplicate_count: 99}"],
        },
        INTRUDER,
    )
    pending.react()

    lesson = stored_lesson(store_of(pending.workdir), LESSON)
    assert lesson.state is LessonState.PUBLISHED
    assert lesson.published_scope == approved_scope
    assert _asserted(pending) == set(approved_scope)
    refunds = pending.catalog.dataset(REFUNDS)
    assert refunds is not None and COVERAGE not in refunds.structured_properties
    assert lesson.control == {"type": "uniqueness", "field": "transaction_id"}
    assert lesson.approved is not None
    assert lesson.approved.actor == STEWARD
    assert lesson.approved.scope == approved_scope
    assert lesson.approved.digest == ApprovedVersion.digest_of(lesson.control, approved_scope)


def test_a_replayed_approval_after_a_scope_edit_changes_nothing(published: Demo) -> None:
    """The steward later edits the scope of the published lesson, which drafts version 2;
    replaying the whole log (the old approval among it) neither publishes the draft nor
    records a second approval."""
    store = store_of(published.workdir)
    scope = [str(u) for u in property_values(store, LESSON, SCOPE)]
    published.catalog.set_structured_properties(LESSON, {SCOPE: [*scope, REFUNDS]}, STEWARD)
    published.react()
    before = all_rows(store)

    replay_from_start(published)

    assert all_rows(store) == before
    lesson = stored_lesson(store, LESSON)
    assert REFUNDS not in lesson.published_scope
    assert lesson.state is LessonState.PENDING_APPROVAL and lesson.revision is not None
    assert [d.actor for d in lesson.decisions if d.decision == "scope approved"] == [STEWARD]


def test_a_pending_written_by_a_steward_opens_no_approval(drafted: Demo) -> None:
    """A steward confirms, writes PENDING and APPROVED before Reflex handled the confirmation:
    the approval came before any report existed, so it is refused and put back to PENDING."""
    for values in ({ROOT_CAUSE_STATUS: "CONFIRMED"}, {APPROVAL: "PENDING"}, {APPROVAL: "APPROVED"}):
        drafted.catalog.set_structured_properties(
            LESSON, {k: [v] for k, v in values.items()}, STEWARD
        )
    drafted.react()

    store = store_of(drafted.workdir)
    lesson = stored_lesson(store, LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert not _asserted(drafted)
    assert property_values(store, LESSON, APPROVAL) == ["PENDING"]
    assert lesson.decisions[-1].decision == "approval refused"
    assert "before Reflex opened the approval" in lesson.decisions[-1].detail

    # the report is on the page now: the steward's next approval publishes
    drafted.steward_sets(LESSON, APPROVAL, "APPROVED")
    assert stored_lesson(store, LESSON).state is LessonState.PUBLISHED


def test_a_refused_approval_is_put_back_so_the_approver_can_approve(pending: Demo) -> None:
    pending.steward_sets(LESSON, APPROVAL, "APPROVED", actor=INTRUDER)

    store = store_of(pending.workdir)
    assert property_values(store, LESSON, APPROVAL) == ["PENDING"]
    assert "approval refused" in _page(pending)
    assert f"{INTRUDER} is not an approver" in _page(pending)
    assert not _asserted(pending)

    pending.steward_sets(LESSON, APPROVAL, "APPROVED")  # no one resets anything by hand
    assert stored_lesson(store, LESSON).state is LessonState.PUBLISHED


@pytest.mark.parametrize(
    "membership",
    [GroupMembershipClass(groups=[APPROVER_GROUP]), NativeGroupMembershipClass([APPROVER_GROUP])],
    ids=["groupMembership", "nativeGroupMembership"],
)
def test_a_membership_the_member_wrote_does_not_authorize(
    pending: Demo, membership: _Aspect
) -> None:
    pending.catalog.emit([acting_as(INTRUDER, INTRUDER, membership)])
    pending.steward_sets(LESSON, APPROVAL, "APPROVED", actor=INTRUDER)
    assert stored_lesson(store_of(pending.workdir), LESSON).state is LessonState.PENDING_APPROVAL
    assert not _asserted(pending)

    # the same membership written for someone by an administrator does authorize
    pending.catalog.emit([acting_as(HR_ADMIN, ZOE, membership)])
    pending.steward_sets(LESSON, APPROVAL, "APPROVED", actor=ZOE)
    assert stored_lesson(store_of(pending.workdir), LESSON).state is LessonState.PUBLISHED
