"""Incident A resolved -> a drafted lesson waiting for a steward (human gate 1)."""

from __future__ import annotations

import logging

from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    IncidentInfoClass,
    IncidentStateClass,
)

from reflex_actions.handlers.assertions import LESSON_OF_ASSERTION, RECURRENCE_TYPE
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import (
    control_yaml,
    lesson_term_mcp,
    lesson_urn_for,
)
from reflex_actions.lessons.drafting import draft_lesson
from reflex_actions.lessons.facts import IncidentFacts, dated_failures
from reflex_actions.lessons.lifecycle import drafted_on
from reflex_actions.lessons.model import IncidentText, RecurrenceResolution
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE, ROOT_CAUSE_STATUS

logger = logging.getLogger(__name__)


def on_incident_change(change: AspectChange, ctx: HandlerContext) -> None:
    before = change.typed(IncidentInfoClass, previous=True)
    after = change.typed(IncidentInfoClass)
    if before is None or after is None:
        return
    if (before.status.state, after.status.state) != (
        IncidentStateClass.ACTIVE,
        IncidentStateClass.RESOLVED,
    ):
        return
    if after.customType == RECURRENCE_TYPE:
        # Reflex raised it (incident B): it is a recurrence of a lesson, never a new lesson.
        _link_resolved_recurrence(change, after, ctx)
        return
    lesson_urn = lesson_urn_for(change.urn)
    if ctx.lesson(lesson_urn) is not None:
        logger.info("lesson %s already drafted for %s; nothing to do", lesson_urn, change.urn)
        return
    datasets = [urn for urn in after.entities if urn.startswith("urn:li:dataset:")]
    source = ctx.catalog.dataset(datasets[0]) if datasets else None
    text = IncidentText(
        urn=change.urn,
        title=after.title or "",
        description=after.description or "",
        resolution_note=after.status.message or "",
        affected_assets=tuple(after.entities),
    )
    history = ctx.histories.history_for(source.urn) if source else None
    # the incident's dates point at the snapshots of the history its backtest reads: its
    # folder, or its table's partitions when it has no snapshot files
    backtested = ctx.histories.backtest_history(source.urn) if source else None
    dated = dated_failures(backtested[0], text) if backtested else []
    facts = IncidentFacts(
        source=source,
        history=history.with_failures(dated, text.urn) if history else None,
        catalog=ctx.catalog,
        histories=ctx.histories.history_for,
    )
    lesson = draft_lesson(lesson_urn, text, facts, ctx.proposer)
    drafted_on(lesson, dated)
    actor = ctx.config.service_actor
    # Workflow properties first, the term info last: a lesson is complete once its info exists,
    # so a crash in between is finished by the redelivered event.
    drafted: dict[str, list[str | float]] = {
        ROOT_CAUSE_STATUS: ["PROPOSED"],
        ROOT_CAUSE: [lesson.root_cause],
    }
    if lesson.control:
        drafted[CONTROL_SPEC] = [control_yaml(lesson)]
    ctx.out.set_properties(lesson_urn, drafted)
    ctx.out.emit(lesson_term_mcp(lesson, after.title or change.urn, actor))
    logger.info("drafted lesson %s (%s) from %s", lesson_urn, lesson.failure_pattern, change.urn)


def _link_resolved_recurrence(
    change: AspectChange, info: IncidentInfoClass, ctx: HandlerContext
) -> None:
    """Note on the lesson that raised incident B that B was resolved, by whom and how."""
    assertion = (
        ctx.catalog.get_aspect(info.source.sourceUrn, AssertionInfoClass)
        if info.source and info.source.sourceUrn
        else None
    )
    lesson_urn = (assertion.customProperties or {}).get(LESSON_OF_ASSERTION) if assertion else None
    lesson = ctx.lesson(lesson_urn) if lesson_urn else None
    listed = [r for r in lesson.recurrences if r.incident == change.urn] if lesson else []
    if lesson is not None and not listed and lesson.older_recurrences:
        logger.info(
            "%s was resolved; lesson %s keeps only its latest recurrences, so its resolution "
            "stays on the incident alone",
            change.urn,
            lesson.urn,
        )
        return
    if lesson is None or not listed:
        logger.warning(
            "%s was resolved; it is a Reflex recurrence incident but no lesson lists it, so no "
            "lesson is drafted from it",
            change.urn,
        )
        return
    recurrence = listed[0]
    resolution = RecurrenceResolution(
        by=change.actor, at=change.time_ms, note=info.status.message or ""
    )
    if recurrence.resolved == resolution:
        return  # redelivered
    recurrence.resolved = resolution
    ctx.out.save_lesson(lesson)
    logger.info("lesson %s: recurrence %s resolved by %s", lesson.urn, change.urn, change.actor)
