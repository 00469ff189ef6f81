"""Human gate 2 passed: publish the control on the approved scope, with provenance."""

from __future__ import annotations

import logging

from datahub.metadata.schema_classes import GlossaryTermInfoClass

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.handlers.assertions import assertion_mcp
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import save_lesson, structured_values
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.similarity.fields import match_field
from reflex_actions.similarity.schema_signals import source_fields
from reflex_actions.vocabulary import APPROVAL, COVERAGE, SCOPE, display_name

logger = logging.getLogger(__name__)


def control_for(
    lesson: Lesson, dataset: DatasetContext, source: DatasetContext | None, ctx: HandlerContext
) -> Control | str:
    """The lesson's control as it runs on ``dataset`` (its own field names), or why it cannot."""
    assert lesson.control is not None
    control = parse_control_spec(lesson.control)
    mapping = dict(lesson.field_mappings.get(dataset.urn, {}))
    for field in source_fields(source or dataset, control.dataset_fields()):
        if field.name in mapping or dataset.urn == lesson.source_dataset:
            continue
        match = match_field(field, dataset, ctx.config.similarity.synonyms)
        if match is None:
            return f"{dataset.name} has no field {field.name}"
        if not match.compatible:
            return f"{dataset.name}.{match.target.name} has an incompatible type"
        if match.target.name != field.name:
            mapping[field.name] = match.target.name
    return control.with_dataset_fields(mapping)


def lesson_title(lesson: Lesson, ctx: HandlerContext) -> str:
    info = ctx.catalog.get_aspect(lesson.urn, GlossaryTermInfoClass)
    return info.name.removeprefix("Lesson: ") if info and info.name else lesson.incident


def on_approved(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> None:
    if change.property_values(APPROVAL, previous=True) != ["PENDING"]:
        # Approving is a decision on the backtest report: it must follow PENDING, which Reflex
        # sets once the report is written (an approval typed together with the confirmation
        # would approve a report nobody has seen).
        logger.warning(
            "lesson %s: approval by %s ignored: reflex.approval was not PENDING before it",
            lesson.urn,
            change.actor,
        )
        return
    if lesson.state not in (LessonState.PENDING_APPROVAL, LessonState.PUBLISHED):
        logger.warning(
            "lesson %s approved by %s while %s: nothing published (it must be confirmed and "
            "backtested first)",
            lesson.urn,
            change.actor,
            lesson.state.value,
        )
        return
    scope = [str(urn) for urn in structured_values(ctx.catalog, lesson.urn, SCOPE)]
    if lesson.state is LessonState.PUBLISHED and set(scope) == set(lesson.published_scope):
        return  # a redelivered approval: already published on exactly this scope
    actor = ctx.config.service_actor
    source = ctx.catalog.dataset(lesson.source_dataset) if lesson.source_dataset else None
    published, skipped = [], []
    for urn in scope:
        dataset = ctx.catalog.dataset(urn)
        control = (
            control_for(lesson, dataset, source, ctx) if dataset else f"{urn} is not in the catalog"
        )
        if isinstance(control, str):
            skipped.append(control)
            continue
        ctx.catalog.emit([assertion_mcp(lesson, urn, control, actor)])
        covered = [str(v) for v in structured_values(ctx.catalog, urn, COVERAGE)]
        if lesson.urn not in covered:
            ctx.catalog.set_structured_properties(urn, {COVERAGE: [*covered, lesson.urn]}, actor)
        published.append(urn)
    lesson.state = LessonState.PUBLISHED
    lesson.published_scope = published
    detail = "scope: " + ", ".join(display_name(u) for u in published)
    if skipped:
        detail += "; not published: " + "; ".join(skipped)
    lesson.decisions.append(
        {
            "decision": "scope approved",
            "actor": change.actor,
            "at": change.time_ms,
            "detail": detail,
        }
    )
    save_lesson(ctx.catalog, lesson, actor)
    logger.info("lesson %s published on %d dataset(s) (%s)", lesson.urn, len(published), detail)


def on_approval_rejected(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> None:
    if lesson.state is not LessonState.PENDING_APPROVAL:
        return
    lesson.state = LessonState.REJECTED
    lesson.decisions.append(
        {"decision": "scope rejected", "actor": change.actor, "at": change.time_ms, "detail": ""}
    )
    save_lesson(ctx.catalog, lesson, ctx.config.service_actor)
