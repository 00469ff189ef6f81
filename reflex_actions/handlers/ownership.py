"""A user left: evaluate the controls of kinds triggered by a user's status on the datasets
they owned; raise incident B with the kind's proposed owner change, applied only once a steward
approves it (on the dataset's structured properties)."""

from __future__ import annotations

import logging

from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    CorpUserStatusClass,
)

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.steward import resolved_incident
from reflex_actions.controls import parse_control_yaml
from reflex_actions.executor import ControlResult, run_control_on_rows
from reflex_actions.handlers.assertions import (
    CONTROL_PROPERTY,
    assertion_urn,
    record_recurrence,
    run_event_mcp,
)
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import as_text, lesson_title
from reflex_actions.kinds.base import OwnerChange, Trigger
from reflex_actions.lessons.lifecycle import owner_decided, propose_owner
from reflex_actions.lessons.model import Lesson, OwnershipProposal
from reflex_actions.registry import kind_for_control
from reflex_actions.report.markdown import escape
from reflex_actions.vocabulary import OWNERSHIP_CHANGE_APPROVAL, PROPOSED_OWNER, display_name

logger = logging.getLogger(__name__)

SUSPENDED = "SUSPENDED"


def on_user_status(change: AspectChange, ctx: HandlerContext) -> None:
    after = change.typed(CorpUserStatusClass)
    before = change.typed(CorpUserStatusClass, previous=True)
    if after is None or after.status != SUSPENDED or (before and before.status == SUSPENDED):
        return
    for dataset_urn in ctx.catalog.datasets_by_owner(change.urn):
        for lesson in ctx.published_lessons(dataset_urn, as_of=change.time_ms):
            _check_dataset(lesson, dataset_urn, change, ctx)


def _check_dataset(
    lesson: Lesson, dataset_urn: str, change: AspectChange, ctx: HandlerContext
) -> None:
    assertion = assertion_urn(lesson.urn, dataset_urn)
    info = ctx.catalog.get_aspect(assertion, AssertionInfoClass)
    dataset = ctx.catalog.dataset(dataset_urn)
    if info is None or dataset is None or CONTROL_PROPERTY not in (info.customProperties or {}):
        return
    control = parse_control_yaml(info.customProperties[CONTROL_PROPERTY])
    kind = kind_for_control(control.type)
    if kind is None or Trigger.USER_STATUS not in kind.triggers:
        return
    snapshot_id = f"{display_name(change.urn)}-suspended-{change.recorded_time}"
    if ctx.runs.judged(assertion, snapshot_id):
        return
    rows = kind.rows_on_user_status(control, dataset, ctx.catalog)
    result = run_control_on_rows(control, rows, snapshot_id)
    actor = ctx.config.service_actor
    if not result.passed:
        remedy = kind.owner_change(control, dataset, change.urn, ctx.catalog)
        _raise_recurrence(lesson, assertion, dataset, remedy, snapshot_id, result, change, ctx)
    # The run event goes last: it marks this departure as judged (OwnRuns.judged).
    run = run_event_mcp(
        assertion, dataset_urn, change.time_ms, snapshot_id, result, None, actor, ctx.runs
    )
    ctx.out.emit(run)


def _raise_recurrence(
    lesson: Lesson,
    assertion: str,
    dataset: DatasetContext,
    remedy: OwnerChange | None,
    snapshot_id: str,
    result: ControlResult,
    change: AspectChange,
    ctx: HandlerContext,
) -> None:
    """Incident B, and the kind's replacement-owner proposal waiting for a steward's approval."""
    actor = ctx.config.service_actor
    note = f"{escape(display_name(change.urn))} was suspended."
    if remedy:
        note += (
            f" Proposed replacement owner: {escape(remedy.owner)} ({escape(remedy.reason)}); it "
            "is applied only once a steward sets reflex.ownershipChangeApproval to APPROVED."
        )
    incident = record_recurrence(
        ctx.catalog,
        ctx.out,
        lesson,
        lesson_title(ctx.catalog, lesson),
        assertion,
        dataset.urn,
        snapshot_id,
        result,
        change.time_ms,
        actor,
        note,
    )
    if remedy and dataset.urn not in lesson.ownership_proposals:
        ctx.out.set_properties(
            dataset.urn, {PROPOSED_OWNER: [remedy.owner], OWNERSHIP_CHANGE_APPROVAL: ["PENDING"]}
        )
        proposal = OwnershipProposal(
            owner=remedy.owner, type=remedy.ownership_type, reason=remedy.reason, incident=incident
        )
        propose_owner(lesson, dataset.urn, proposal)
    ctx.out.save_lesson(lesson)
    logger.info("incident %s: %s, after %s left", incident, dataset.name, change.urn)


def pending_ownership_lesson(dataset_urn: str, ctx: HandlerContext) -> Lesson | None:
    return next(
        (x for x in ctx.published_lessons(dataset_urn) if dataset_urn in x.ownership_proposals),
        None,
    )


def on_ownership_decision(
    lesson: Lesson, change: AspectChange, ctx: HandlerContext, approved: bool
) -> str | None:
    """Apply (or drop) the pending owner proposal with the owner the decision's own event
    carries (the steward may have edited it); None when done, else why it was refused."""
    proposal = lesson.ownership_proposals[change.urn]
    actor = ctx.config.service_actor
    owner = as_text(change.property_values(PROPOSED_OWNER))
    if approved:
        if not owner.startswith(("urn:li:corpuser:", "urn:li:corpGroup:")):
            return "reflex.proposedOwner in the approved values is " + (
                f"not a user or group urn ({owner[:200]!r})" if owner else "empty"
            )
        ctx.out.add_owner(change.urn, owner, proposal.type)
        detail = (
            f"{owner} added as {proposal.type} of {display_name(change.urn)} ({proposal.reason})"
        )
        note = f"Ownership change approved by {change.actor}: {detail}."
        ctx.out.emit(resolved_incident(ctx.catalog, proposal.incident, note, actor))
    else:
        detail = f"proposed owner {owner or proposal.owner} for {display_name(change.urn)} "
        detail += "rejected"
    owner_decided(lesson, change.urn)
    decision = "ownership change " + ("approved" if approved else "rejected")
    lesson.record_decision(decision, change.stamp, detail)
    ctx.out.save_lesson(lesson)
    logger.info("lesson %s: %s", lesson.urn, detail)
    return None
