"""New data landed on a covered dataset: run its controls; a failure raises incident B."""

from __future__ import annotations

import logging
from pathlib import Path

from datahub.metadata.schema_classes import AssertionInfoClass, OperationClass

from reflex_actions.backtest.history import row_counts
from reflex_actions.controls import Control, parse_control_yaml
from reflex_actions.errors import ReflexError
from reflex_actions.executor import run_control
from reflex_actions.handlers.assertions import (
    CONTROL_PROPERTY,
    already_ran,
    assertion_urn,
    record_recurrence,
    row_counts_after,
    run_event_mcp,
)
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.landing import (
    DEFAULT_PARTITION,
    SnapshotRefused,
    locate_snapshot,
    parent_snapshot,
)
from reflex_actions.handlers.lesson_store import structured_values
from reflex_actions.handlers.publish import lesson_title
from reflex_actions.kinds import triggered_by
from reflex_actions.kinds.base import Trigger
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.vocabulary import COVERAGE

logger = logging.getLogger(__name__)


def published_lessons(
    dataset_urn: str, ctx: HandlerContext, as_of: int | None = None
) -> list[Lesson]:
    """The published lessons whose controls cover this dataset; with ``as_of`` (an event's
    time), only those approved by then: an event is judged by the coverage at its own time,
    so replaying an old event never runs a control published after it."""
    lessons = []
    for urn in structured_values(ctx.catalog, dataset_urn, COVERAGE):
        lesson = ctx.lesson(str(urn))
        if (
            lesson
            and lesson.state is LessonState.PUBLISHED
            and dataset_urn in lesson.published_scope
            and (as_of is None or (lesson.approved is not None and lesson.approved.at <= as_of))
        ):
            lessons.append(lesson)
    return lessons


def names_no_data(operation: OperationClass) -> bool:
    """Usage ingestion (Snowflake, BigQuery, Redshift) reports operations that name no snapshot
    or partition: there is nothing on the actions host to check."""
    properties = operation.customProperties or {}
    partition = operation.partitionSpec.partition if operation.partitionSpec else DEFAULT_PARTITION
    return not (
        properties.get("snapshot")
        or properties.get("snapshot_id")
        or partition != DEFAULT_PARTITION
    )


def _earlier_counts(
    control: Control, assertion: str, dataset_urn: str, ctx: HandlerContext
) -> list[int]:
    """The row counts a control judging volume compares a landing with: those its assertion's
    runs carried forward, else (its first run) the normal snapshots of the dataset's history."""
    if not control.earlier_counts_needed():
        return []
    counts = row_counts_after(ctx.catalog, assertion)
    history = ctx.history_for(dataset_urn) if not counts else None
    if history is not None:
        counts = [n for sid, n in row_counts(history).items() if sid not in history.labels]
    return counts


def on_operation(change: AspectChange, ctx: HandlerContext) -> None:
    lessons = published_lessons(change.urn, ctx, as_of=change.time_ms)
    if not lessons:
        return
    operation = change.typed(OperationClass)
    dataset = ctx.catalog.dataset(change.urn)
    if operation is None or dataset is None:
        return
    if names_no_data(operation):
        logger.debug("operation on %s names no snapshot or partition: nothing to check", change.urn)
        return
    actor = ctx.config.service_actor
    path: Path | None = None
    refused: str | None = None
    try:
        path, snapshot_id = locate_snapshot(
            operation, dataset.name, dataset.platform, ctx.config.landing
        )
    except SnapshotRefused as refusal:
        logger.warning("not running controls on %s: %s", change.urn, refusal)
        snapshot_id, refused = f"refused-{operation.timestampMillis}", str(refusal)
    for lesson in lessons:
        assertion = assertion_urn(lesson.urn, change.urn)
        info = ctx.catalog.get_aspect(assertion, AssertionInfoClass)
        if info is None or CONTROL_PROPERTY not in (info.customProperties or {}):
            logger.warning(
                "lesson %s covers %s but its assertion is missing", lesson.urn, change.urn
            )
            continue
        control = parse_control_yaml(info.customProperties[CONTROL_PROPERTY])
        if not triggered_by(control.type, Trigger.LANDED_DATA) or already_ran(
            ctx.catalog, assertion, operation.timestampMillis
        ):
            continue
        result, error = None, refused
        if path is not None:
            try:
                parent = parent_snapshot(control, snapshot_id, ctx.config.landing, ctx.history_for)
                earlier = _earlier_counts(control, assertion, change.urn, ctx)
                result = run_control(control, path, reference=parent, earlier_counts=earlier)
            except ReflexError as failure:  # corrupt or drifted snapshot: an ERROR run, no incident
                error = str(failure)
        if result is not None and not result.passed:
            incident = record_recurrence(
                ctx.catalog,
                ctx.out,
                lesson,
                lesson_title(lesson, ctx),
                assertion,
                change.urn,
                snapshot_id,
                result,
                operation.timestampMillis,
                actor,
            )
            ctx.out.save_lesson(lesson)
            logger.info("incident %s raised on %s (lesson %s)", incident, change.urn, lesson.urn)
        # The run event goes last: it marks this landing as handled (see already_ran).
        run = run_event_mcp(
            assertion, change.urn, operation.timestampMillis, snapshot_id, result, error, actor
        )
        ctx.out.emit(run)
