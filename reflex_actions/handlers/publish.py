"""Human gate 2 passed: publish the control on the approved scope, with provenance."""

from __future__ import annotations

import logging

from datahub.metadata.schema_classes import StatusClass

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.steward import acting_as
from reflex_actions.controls import Control, control_spec, parse_control_spec, parse_control_yaml
from reflex_actions.errors import ControlSpecError, ReflexError
from reflex_actions.handlers.assertions import assertion_mcp, assertion_urn
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import (
    MAX_SCOPE_BYTES,
    as_text,
    structured_values,
)
from reflex_actions.lessons.lifecycle import publish
from reflex_actions.lessons.model import ApprovedVersion, Lesson, LessonState, stored_scope_bytes
from reflex_actions.similarity.fields import match_field
from reflex_actions.similarity.schema_signals import source_fields
from reflex_actions.vocabulary import (
    CONTROL_SPEC,
    COVERAGE,
    LIFECYCLE,
    SCOPE,
    VERSION,
    names_of,
)

logger = logging.getLogger(__name__)


def scope_refusal(scope: list[str]) -> str | None:
    """Why a scope cannot be published, or None when it can. Its bound is what the lesson's
    record can hold (``MAX_SCOPE_BYTES``), not a count: a scope of short names holds more."""
    if not scope:
        return "reflex.scope is empty: there is nothing to publish"
    size = stored_scope_bytes(scope)
    if size > MAX_SCOPE_BYTES:
        fits = len(scope) * MAX_SCOPE_BYTES // size
        return (
            f"reflex.scope names {len(scope):,} datasets in {size:,} bytes as stored; a "
            f"lesson's record holds a scope of at most {MAX_SCOPE_BYTES:,} bytes (about "
            f"{fits:,} datasets named like these): split it into lessons, by domain or platform"
        )
    return None


def control_for(
    lesson: Lesson, dataset: DatasetContext, source: DatasetContext | None, ctx: HandlerContext
) -> Control | str:
    """The lesson's control as it runs on ``dataset`` (its own field names), or why it cannot."""
    if lesson.control is None:
        raise ReflexError(f"lesson {lesson.urn} has no control")
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


def on_approved(lesson: Lesson, change: AspectChange, ctx: HandlerContext) -> str | None:
    """Publish exactly what the approval event carries: its scope, and its control spec, which
    must be the control that was backtested."""
    scope = list(dict.fromkeys(str(urn) for urn in change.property_values(SCOPE)))
    if lesson.state is LessonState.PUBLISHED:
        _judge_repeated_approval(lesson, change, scope)
        return None
    if lesson.state is LessonState.RETIRED:
        return (
            "the lesson is retired: set reflex.version to the version to bring back, which is "
            "backtested again and then approved"
        )
    if lesson.state is not LessonState.PENDING_APPROVAL:
        return f"the lesson is {lesson.state.value}: it must be confirmed and backtested first"
    if not lesson.approval_open:
        return (
            "it was written before Reflex opened the approval, so it cannot have seen the "
            "backtest report; approve again now that the report is on this page"
        )
    control = lesson.control or {}
    if event_control(change) != control:
        return (
            "reflex.controlSpec was changed after the backtest: the approval must be on the "
            "control that was backtested (confirm the new control to backtest it)"
        )
    if refusal := scope_refusal(scope):
        return refusal
    earlier = _rolled_back(lesson)
    if earlier is not None and set(scope) != set(earlier.scope):
        return (
            f"a rollback republishes version {earlier.number} exactly, on its scope: "
            + names_of(earlier.scope)
            + "; approve that scope, and change it afterwards as a new version"
        )
    running = list(lesson.published_scope)  # the version in force until now, if any
    published, skipped = _publish(lesson, scope, ctx)
    withdraw(lesson, [urn for urn in running if urn not in published], ctx)
    version = _approved_version(lesson, control, scope, change, published)
    publish(lesson, version, skipped=skipped, at_ms=change.time_ms)
    ctx.out.set_properties(lesson.urn, {LIFECYCLE: ["ACTIVE"], VERSION: [version.number]})
    detail = f"version {version.number}; scope: {names_of(lesson.published_scope)}"
    if lesson.publish_skipped:
        skipped = lesson.publish_skipped
        detail += f"; not published on {len(skipped):,}: " + "; ".join(skipped[:5])
        detail += ", …" if len(skipped) > 5 else ""
    lesson.record_decision("scope approved", change.stamp, detail)
    ctx.out.save_lesson(lesson)
    logger.info("lesson %s published (%s)", lesson.urn, detail)
    return None


def _rolled_back(lesson: Lesson) -> ApprovedVersion | None:
    """The version a waiting rollback republishes, if the draft is one."""
    revision = lesson.revision
    if revision is None or revision.rollback_of is None:
        return None
    return lesson.version(revision.rollback_of)


def _approved_version(
    lesson: Lesson,
    control: dict[str, object],
    scope: list[str],
    change: AspectChange,
    published: list[str],
) -> ApprovedVersion:
    """The version this approval makes: what was approved, by whom, on what backtest."""
    revision = lesson.revision
    return ApprovedVersion(
        control=control,
        scope=scope,
        actor=change.actor or "",
        at=change.time_ms,
        digest=ApprovedVersion.digest_of(control, scope),
        number=lesson.next_version,
        origin=revision.origin if revision else f"drafted from incident {lesson.incident}",
        rollback_of=revision.rollback_of if revision else None,
        backtest=lesson.backtest,
        report=lesson.report,
        field_mappings=lesson.field_mappings,
        published_scope=published,
    )


def event_control(change: AspectChange) -> dict[str, object] | None:
    """The control spec the event carries, canonical like ``Lesson.control``; None if unusable."""
    try:
        control = parse_control_yaml(as_text(change.property_values(CONTROL_SPEC)))
    except ControlSpecError:
        return None
    return control_spec(control)


def _judge_repeated_approval(lesson: Lesson, change: AspectChange, scope: list[str]) -> None:
    """A redelivered or replayed approval of a published lesson changes nothing; say whether
    it is the one that was published."""
    control = event_control(change) or {}
    digest = ApprovedVersion.digest_of(control, scope)
    if lesson.approved is not None and digest == lesson.approved.digest:
        logger.info("lesson %s: approval already published exactly; nothing to do", lesson.urn)
        return
    logger.warning(
        "lesson %s: an approval by %s carries a scope or control that differs from the "
        "published version (approved by %s); nothing was changed",
        lesson.urn,
        change.actor,
        lesson.approved.actor if lesson.approved else "unknown",
    )


def _publish(lesson: Lesson, scope: list[str], ctx: HandlerContext) -> tuple[list[str], list[str]]:
    """An assertion and coverage on every scoped dataset the control fits: those datasets,
    and the others, each with the reason. Every write is idempotent, so a crash midway is
    finished on redelivery."""
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
        ctx.out.emit(
            assertion_mcp(lesson, urn, control, actor),  # a dataset dropped once may come back
            acting_as(actor, assertion_urn(lesson.urn, urn), StatusClass(removed=False)),
        )
        covered = [str(v) for v in structured_values(ctx.catalog, urn, COVERAGE)]
        if lesson.urn not in covered:
            ctx.out.set_properties(urn, {COVERAGE: [*covered, lesson.urn]})
        published.append(urn)
    return published, skipped


def withdraw(lesson: Lesson, datasets: list[str], ctx: HandlerContext) -> None:
    """Take the lesson's control off these datasets: its assertion soft-deleted
    (``status.removed``, its runs stay readable) and the lesson out of their coverage."""
    actor = ctx.config.service_actor
    for urn in datasets:
        ctx.out.emit(acting_as(actor, assertion_urn(lesson.urn, urn), StatusClass(removed=True)))
        covered = [str(v) for v in structured_values(ctx.catalog, urn, COVERAGE)]
        if lesson.urn in covered:
            ctx.out.set_properties(urn, {COVERAGE: [u for u in covered if u != lesson.urn]})
