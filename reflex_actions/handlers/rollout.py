"""A version goes out slice by slice: its assertion and coverage on each dataset of its scope,
then off the datasets of the versions it replaces that it does not cover.

A scope may be as large as the estate (a rule: every PostgreSQL table), and publishing costs
~4 ms a dataset, so one decision cannot carry it: 100,000 datasets would hold every event back
for minutes. The approval's decision publishes the first :data:`IN_DECISION` datasets; the rest
goes in slices of :data:`SLICE_DATASETS`, each one decision taken in the action's turns (events
waiting go first, as with the schedule's sweep), the lesson's ``rollout`` saying where it
stands. Every write is idempotent and the rollout is saved with each slice, so a crash resumes
at the slice it stopped in; an unfinished rollout is picked up when the action starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial

from datahub.metadata.schema_classes import StatusClass

from reflex_actions.catalog.base import Catalog
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.steward import acting_as
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.assertions import assertion_mcp, assertion_urn
from reflex_actions.handlers.context import HandlerContext, decide_then_apply
from reflex_actions.handlers.lesson_store import structured_values
from reflex_actions.lessons.lifecycle import rolled_out, rollout_phase_done
from reflex_actions.lessons.model import ApprovedVersion, Lesson, Rollout
from reflex_actions.lessons.scope import ScopeRule
from reflex_actions.similarity.fields import match_field
from reflex_actions.similarity.schema_signals import source_fields
from reflex_actions.vocabulary import COVERAGE, LESSONS_NODE

logger = logging.getLogger(__name__)

#: Datasets one slice publishes or withdraws: ~0.4 s of writes on the 2-core reference machine
#: (``bench/bench_publish.py``: ~4 ms a dataset), the most an event waits behind one.
SLICE_DATASETS = 100
#: Datasets the approval's own decision publishes: a scope this size is published by the time
#: the approval is handled; a larger one goes on in slices.
IN_DECISION = 5 * SLICE_DATASETS

#: version number -> its datasets in the order they go out (a rule's read once per rollout),
#: and (the versions published and withdrawn) -> the datasets a withdrawal takes the lesson off
Datasets = dict[object, list[str]]


def rule_datasets(rule: ScopeRule, catalog: Catalog) -> set[str]:
    """The datasets the catalog holds that match every criterion of the rule, now."""
    found: set[str] | None = None
    for criterion, lookup in (
        (rule.platform, catalog.datasets_by_platform),
        (rule.domain, catalog.datasets_by_domain),
        (rule.field, catalog.datasets_by_field),
    ):
        if criterion is not None:
            matching = set(lookup(criterion))
            found = matching if found is None else found & matching
    return found or set()


def version_datasets(version: ApprovedVersion, catalog: Catalog, known: Datasets) -> list[str]:
    """Where a version goes: the datasets it lists (in their order), or, with a rule, those and
    every dataset the rule matches, in urn order."""
    if version.number not in known:
        if version.scope_rule is None:
            known[version.number] = list(dict.fromkeys(version.scope))
        else:
            matching = rule_datasets(version.scope_rule, catalog)
            known[version.number] = sorted(matching.union(version.scope))
    return known[version.number]


def _after(datasets: list[str], after: str) -> list[str]:
    """The datasets after ``after``: in a listed scope, those after it; in a rule's (urn
    order), the urns greater, though the catalog changed since the cursor was saved."""
    if not after:
        return datasets
    if after in datasets:
        return datasets[datasets.index(after) + 1 :]
    return [urn for urn in datasets if urn > after]


def rollout_slice(
    lesson: Lesson, ctx: HandlerContext, known: Datasets, limit: int
) -> Rollout | None:
    """Publish (or withdraw) the next ``limit`` datasets of the lesson's rollout within the
    current decision (the caller saves the lesson: where it stands); the rollout as it
    stands after them (``lesson.rollout`` is None once it is over)."""
    budget, rollout = limit, lesson.rollout
    while lesson.rollout is not None and budget > 0:
        rollout = lesson.rollout
        if rollout.phase == "publish" and rollout.publish is not None:
            version = lesson.version(rollout.publish)
            if version is None:
                raise ReflexError(f"lesson {lesson.urn} rolls out version {rollout.publish}")
            left = _after(version_datasets(version, ctx.catalog, known), rollout.after)
            batch = left[:budget]
            published, skipped, withdrawn = _publish_on(lesson, batch, ctx)
        else:
            left = _after(_withdrawn_datasets(lesson, ctx, known), rollout.after)
            batch = left[:budget]
            published, skipped, withdrawn = 0, {}, withdraw(lesson, batch, ctx)
        if batch:
            rolled_out(
                lesson, after=batch[-1], published=published, skipped=skipped, withdrawn=withdrawn
            )
        budget -= len(batch)
        rollout = lesson.rollout
        if len(left) == len(batch):  # the phase has no datasets left
            rollout_phase_done(lesson)
            if lesson.rollout is None:
                logger.info("lesson %s: rolled out (%s)", lesson.urn, rollout.progress())
    return lesson.rollout or rollout


def _withdrawn_datasets(lesson: Lesson, ctx: HandlerContext, known: Datasets) -> list[str]:
    """The datasets of the versions being withdrawn that the version published does not
    cover, in urn order (worked out once for the slices of one rollout)."""
    rollout = lesson.rollout
    assert rollout is not None
    key = (rollout.publish, tuple(rollout.withdraw))
    if key not in known:
        known[key] = _leaving(lesson, rollout, ctx, known)
    return known[key]


def _leaving(lesson: Lesson, rollout: Rollout, ctx: HandlerContext, known: Datasets) -> list[str]:
    kept: set[str] = set()
    if rollout.publish is not None and (version := lesson.version(rollout.publish)):
        kept = set(version_datasets(version, ctx.catalog, known))
    leaving: set[str] = set()
    for number in rollout.withdraw:
        if (earlier := lesson.version(number)) is not None:
            leaving.update(version_datasets(earlier, ctx.catalog, known))
    return sorted(leaving - kept)


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


def _publish_on(
    lesson: Lesson, datasets: list[str], ctx: HandlerContext
) -> tuple[int, dict[str, str], int]:
    """An assertion and coverage on every dataset the control fits: how many; the others,
    each with the reason (an earlier version withdrawn from those it was on); and how many
    were withdrawn so."""
    actor = ctx.config.service_actor
    source = ctx.catalog.dataset(lesson.source_dataset) if lesson.source_dataset else None
    published, skipped, withdrawn = 0, {}, 0
    for urn in datasets:
        dataset = ctx.catalog.dataset(urn)
        control = (
            control_for(lesson, dataset, source, ctx) if dataset else f"{urn} is not in the catalog"
        )
        if isinstance(control, str):
            skipped[urn] = control
            withdrawn += withdraw(lesson, [urn], ctx)
            continue
        ctx.out.emit(
            assertion_mcp(lesson, urn, control, actor),  # a dataset dropped once may come back
            acting_as(actor, assertion_urn(lesson.urn, urn), StatusClass(removed=False)),
        )
        covered = [str(v) for v in structured_values(ctx.catalog, urn, COVERAGE)]
        if lesson.urn not in covered:
            ctx.out.set_properties(urn, {COVERAGE: [*covered, lesson.urn]})
        published += 1
    return published, skipped, withdrawn


def withdraw(lesson: Lesson, datasets: list[str], ctx: HandlerContext) -> int:
    """Take the lesson's control off those of these datasets it covers: its assertion
    soft-deleted (``status.removed``, its runs stay readable) and the lesson out of their
    coverage; how many it was on. A dataset it never covered gets no write."""
    actor = ctx.config.service_actor
    withdrawn = 0
    for urn in datasets:
        covered = [str(v) for v in structured_values(ctx.catalog, urn, COVERAGE)]
        if lesson.urn not in covered:
            continue
        ctx.out.emit(acting_as(actor, assertion_urn(lesson.urn, urn), StatusClass(removed=True)))
        ctx.out.set_properties(urn, {COVERAGE: [u for u in covered if u != lesson.urn]})
        withdrawn += 1
    return withdrawn


def continue_rollouts(
    ctx: HandlerContext,
    turn: Callable[[], AbstractContextManager[object]] = nullcontext,
    owns: Callable[[str], bool] = lambda _lesson: True,
) -> int:
    """Carry every unfinished rollout of the lessons this instance ``owns`` (all, but where
    several share the work: the one whose change-log partition holds the lesson's term, which
    handled its approval) to its end, one slice per decision, each taken within ``turn()``
    (the action's: events waiting go before the next slice). The lesson is read anew for each
    slice: an event between two may have changed it (a new approval starts a rollout of its
    own, which takes over). How many slices were done."""
    slices = 0
    with turn():
        lessons = [urn for urn in ctx.catalog.terms_under(LESSONS_NODE) if owns(urn)]
    for urn in lessons:
        known: Datasets = {}  # the rule's datasets, read once for this lesson's slices
        while True:
            with turn():
                lesson = ctx.lesson(urn)
                if lesson is None or lesson.rollout is None:
                    break
                decide_then_apply(ctx, partial(_next_slice, lesson, ctx, known))
                slices += 1
    return slices


def _next_slice(lesson: Lesson, ctx: HandlerContext, known: Datasets) -> None:
    rollout_slice(lesson, ctx, known, SLICE_DATASETS)
    ctx.out.save_lesson(lesson)
