"""Ownership decisions: a suspended sole owner of a covered dataset raises incident B with a
proposed replacement (``on_user_status``), applied only when an approver approves it on the
dataset (``on_dataset_properties``); anyone else's approval is reverted and refused."""

from __future__ import annotations

import logging

import pytest
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    AuditStampClass,
    CorpUserStatusClass,
    GroupMembershipClass,
    IncidentInfoClass,
    IncidentStateClass,
    OwnershipClass,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.assertions import RECURRENCE_TYPE, assertion_urn
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext, decide_and_apply
from reflex_actions.handlers.directives import AddOwner, Emit, SaveLesson, SetProperties, apply
from reflex_actions.handlers.gates import on_dataset_properties, on_lesson_properties
from reflex_actions.handlers.lesson_store import load_lesson, structured_values
from reflex_actions.handlers.ownership import on_user_status
from reflex_actions.kinds.orphaned_ownership import ORPHANED_OWNERSHIP
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import (
    APPROVAL,
    LIFECYCLE,
    OWNERSHIP_CHANGE_APPROVAL,
    PROPOSED_OWNER,
    ROOT_CAUSE_STATUS,
)
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    INTRUDER,
    LESSON,
    PAYMENTS,
    STEWARD,
    add_dataset,
    change,
    context,
    kinds,
    property_change,
    published_lesson,
    seed,
)

BOB = "urn:li:corpuser:bob"
TEAM = "urn:li:corpGroup:finance-data"
OWNERSHIP_CONTROL = {
    "type": "active_ownership",
    "min_active_owners": 1,
    "owner_types": ["TECHNICAL_OWNER"],
}
SUSPENDED_AT = 200
ASSERTION = assertion_urn(LESSON, PAYMENTS)


def status(value: str) -> CorpUserStatusClass:
    return CorpUserStatusClass(status=value, lastModified=AuditStampClass(time=0, actor=STEWARD))


def orphaned_estate() -> tuple[MemoryCatalog, HandlerContext, AspectChange]:
    """PAYMENTS owned only by Bob (of team finance-data), covered by a published
    active_ownership lesson; Bob has just been suspended (the change that says so)."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS, owners=(BOB,))
    published_lesson(
        catalog,
        approved_at=SUSPENDED_AT - 100,
        control=OWNERSHIP_CONTROL,
        failure_pattern=ORPHANED_OWNERSHIP,
    )
    seed(
        catalog,
        acting_as(STEWARD, BOB, GroupMembershipClass(groups=[TEAM])),
        acting_as(STEWARD, BOB, status("SUSPENDED")),
    )
    suspension = change(BOB, status("SUSPENDED"), status("ACTIVE"), time_ms=SUSPENDED_AT)
    return catalog, context(catalog), suspension


def proposal_pending() -> tuple[MemoryCatalog, HandlerContext, str]:
    """The orphaned estate after Bob's suspension was decided and applied; a fresh context for
    the next decision, and incident B's urn."""
    catalog, ctx, suspension = orphaned_estate()
    decide_and_apply(on_user_status, suspension, ctx)
    catalog.writes.clear()
    stored = load_lesson(catalog, LESSON)
    assert stored is not None
    return catalog, context(catalog), stored.ownership_proposals[PAYMENTS].incident


def ownership_decision(actor: str) -> AspectChange:
    """A steward's edit of the pending proposal on PAYMENTS: PENDING to APPROVED."""
    return property_change(
        PAYMENTS,
        {PROPOSED_OWNER: [TEAM], OWNERSHIP_CHANGE_APPROVAL: ["PENDING"]},
        {OWNERSHIP_CHANGE_APPROVAL: ["APPROVED"]},
        actor=actor,
        time_ms=SUSPENDED_AT + 10,
    )


def test_a_suspended_sole_owner_raises_b_proposes_a_replacement_then_records_the_run() -> None:
    catalog, ctx, suspension = orphaned_estate()

    on_user_status(suspension, ctx)

    assert catalog.writes == []
    assert kinds(ctx.out.directives) == ["Emit", "SetProperties", "SaveLesson", "Emit"]
    raised, proposal, noted, run = ctx.out.directives
    assert isinstance(raised, Emit) and isinstance(raised.mcps[0].aspect, IncidentInfoClass)
    assert raised.mcps[0].aspect.customType == RECURRENCE_TYPE
    incident = raised.mcps[0].entityUrn
    assert proposal == SetProperties(
        PAYMENTS, {PROPOSED_OWNER: [TEAM], OWNERSHIP_CHANGE_APPROVAL: ["PENDING"]}
    )
    assert isinstance(noted, SaveLesson)
    assert [r.incident for r in noted.lesson.recurrences] == [incident]
    pending = noted.lesson.ownership_proposals[PAYMENTS]
    assert (pending.owner, pending.type, pending.incident) == (TEAM, "TECHNICAL_OWNER", incident)
    assert isinstance(run, Emit) and run.mcps[0].entityUrn == ASSERTION  # last: handled

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    assert structured_values(catalog, PAYMENTS, OWNERSHIP_CHANGE_APPROVAL) == ["PENDING"]
    assert catalog.latest_timeseries(ASSERTION, AssertionRunEventClass) is not None
    owners = catalog.get_aspect(PAYMENTS, OwnershipClass)
    assert owners is not None and [o.owner for o in owners.owners] == [BOB]  # not yet applied


def test_an_approvers_approval_adds_the_owner_resolves_b_and_notes_it() -> None:
    catalog, ctx, incident = proposal_pending()

    on_dataset_properties(ownership_decision(STEWARD), ctx)

    assert kinds(ctx.out.directives) == ["AddOwner", "Emit", "SaveLesson"]
    added, resolved, noted = ctx.out.directives
    assert added == AddOwner(PAYMENTS, TEAM, "TECHNICAL_OWNER")
    assert isinstance(resolved, Emit) and resolved.mcps[0].entityUrn == incident
    assert isinstance(noted, SaveLesson) and noted.lesson.ownership_proposals == {}
    assert noted.lesson.decisions[-1].decision == "ownership change approved"

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    owners = catalog.get_aspect(PAYMENTS, OwnershipClass)
    assert owners is not None and [o.owner for o in owners.owners] == [BOB, TEAM]
    info = catalog.get_aspect(incident, IncidentInfoClass)
    assert info is not None and info.status.state == IncidentStateClass.RESOLVED


def test_a_non_approvers_approval_is_reverted_to_pending_and_refused() -> None:
    catalog, ctx, _ = proposal_pending()

    on_dataset_properties(ownership_decision(INTRUDER), ctx)

    revert, noted = ctx.out.directives
    assert revert == SetProperties(PAYMENTS, {OWNERSHIP_CHANGE_APPROVAL: ["PENDING"]})
    assert isinstance(noted, SaveLesson)
    assert noted.lesson.decisions[-1].decision == (
        "ownership change approval on finance.payments refused"
    )
    assert "is not an approver" in noted.lesson.decisions[-1].detail
    assert PAYMENTS in noted.lesson.ownership_proposals  # still waiting for an approver

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    assert structured_values(catalog, PAYMENTS, OWNERSHIP_CHANGE_APPROVAL) == ["PENDING"]
    owners = catalog.get_aspect(PAYMENTS, OwnershipClass)
    assert owners is not None and [o.owner for o in owners.owners] == [BOB]


def test_retiring_the_lesson_withdraws_its_pending_owner_proposals() -> None:
    """Once retired, no approval can apply a proposal: none is left waiting on the dataset,
    and an approval after it changes no ownership."""
    catalog, ctx, _ = proposal_pending()
    retire = property_change(
        LESSON,
        {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["APPROVED"]},
        {LIFECYCLE: ["RETIRED"]},
        time_ms=SUSPENDED_AT + 5,
    )

    decide_and_apply(on_lesson_properties, retire, ctx)

    assert structured_values(catalog, PAYMENTS, PROPOSED_OWNER) == []
    assert structured_values(catalog, PAYMENTS, OWNERSHIP_CHANGE_APPROVAL) == []
    retired = load_lesson(catalog, LESSON)
    assert retired is not None and retired.state is LessonState.RETIRED
    assert retired.ownership_proposals == {}
    assert "owner proposals withdrawn on finance.payments" in retired.decisions[-1].detail

    decide_and_apply(on_dataset_properties, ownership_decision(STEWARD), context(catalog))
    owners = catalog.get_aspect(PAYMENTS, OwnershipClass)
    assert owners is not None and [o.owner for o in owners.owners] == [BOB]


def test_an_approvers_rejection_drops_the_proposal_adds_no_owner_and_says_so() -> None:
    catalog, ctx, incident = proposal_pending()
    rejection = property_change(
        PAYMENTS,
        {PROPOSED_OWNER: [TEAM], OWNERSHIP_CHANGE_APPROVAL: ["PENDING"]},
        {OWNERSHIP_CHANGE_APPROVAL: ["REJECTED"]},
        actor=STEWARD,
        time_ms=SUSPENDED_AT + 10,
    )

    on_dataset_properties(rejection, ctx)

    assert kinds(ctx.out.directives) == ["SaveLesson"]  # no owner added, incident B stays open
    (noted,) = ctx.out.directives
    assert isinstance(noted, SaveLesson) and noted.lesson.ownership_proposals == {}
    decision = noted.lesson.decisions[-1]
    assert decision.decision == "ownership change rejected"
    assert decision.detail == f"proposed owner {TEAM} for finance.payments rejected"
    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    owners = catalog.get_aspect(PAYMENTS, OwnershipClass)
    assert owners is not None and [o.owner for o in owners.owners] == [BOB]
    info = catalog.get_aspect(incident, IncidentInfoClass)
    assert info is not None and info.status.state != IncidentStateClass.RESOLVED


def test_an_approval_where_no_owner_change_is_pending_decides_nothing_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = MemoryCatalog()
    ctx = context(catalog)
    with caplog.at_level(logging.INFO, logger="reflex_actions.handlers.gates"):
        on_dataset_properties(ownership_decision(STEWARD), ctx)
    assert ctx.out.directives == []
    assert f"APPROVED on {PAYMENTS}, but no owner change is pending there" in caplog.text
