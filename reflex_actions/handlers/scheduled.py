"""A schedule tick: judge the controls that time alone can fail (a stale table sends no event).

On each tick (the action's timer beside Kafka, the embedded source's idle ticks, or
``datahub-reflex evaluate --due`` from cron) every published lesson whose kind is evaluated on
a schedule is judged on each dataset of its scope:

* a control judged as of a time (freshness) once per interval slot, as of the tick: on the
  last update DataHub records (``operation``), or on the newest values of the snapshot the
  latest ``operation`` names;
* any other scheduled control only on a recorded fact newer than its last run (a
  ``datasetProfile`` whose event was missed), at that fact's time.

A control is due when Reflex has no run of it for the slot the tick falls in (the run's id
names the slot's start), so a tick delivered twice, or two ticks in one slot, judge once, and
a replayed old tick judges nothing new. Incident B of a stale table is keyed by
its newest time, so a table stale for days raises one incident, not one per tick.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import DatasetProfileClass, OperationClass

from reflex_actions.catalog.base import CatalogError
from reflex_actions.engines.base import EngineError
from reflex_actions.errors import ReflexError
from reflex_actions.executor import ControlResult, OnRecorded, run_controls_on_recorded
from reflex_actions.handlers.context import HandlerContext, decide_then_apply
from reflex_actions.handlers.directives import Emit
from reflex_actions.handlers.landing import SnapshotRefused
from reflex_actions.handlers.lesson_store import lesson_term_mcp, lesson_title
from reflex_actions.handlers.rollout import version_datasets
from reflex_actions.handlers.runs import (
    CoveredControl,
    covered_control,
    data_at,
    landed_data,
    on_recorded,
    profile_fact,
    record_run,
    run_on_target,
)
from reflex_actions.kinds.base import Trigger
from reflex_actions.lessons.model import Lesson
from reflex_actions.registry import triggered_by
from reflex_actions.sql import RecordedFacts
from reflex_actions.times import iso
from reflex_actions.vocabulary import LESSONS_NODE

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class NotInForce:
    """A scheduled lesson the tick did not judge: it was published after the tick's time."""

    lesson: str
    in_force_since: str | None


@dataclass
class SweepCounts:
    """What one tick did, for the report and the CLI."""

    judged: int = 0
    skipped: int = 0
    failed: int = 0
    errors: int = 0
    #: the scheduled lessons not yet in force at the tick (an ``--as-of`` before an approval)
    not_in_force: list[NotInForce] = field(default_factory=list)


#: Datasets of one lesson judged in one slice of a sweep: one decision, then the events that
#: waited meanwhile go first (a slice of freshness on recorded facts takes ~1 s on the 2-core
#: reference machine at most).
SLICE_DATASETS = 100


def on_schedule(
    ctx: HandlerContext,
    now_ms: int,
    interval_seconds: int,
    turn: Callable[[], AbstractContextManager[object]] = nullcontext,
    owns: Callable[[str], bool] = lambda _dataset: True,
) -> SweepCounts:
    """Judge every scheduled control that is due at ``now_ms`` on the datasets this instance
    ``owns`` (all but where several share the work), in slices of :data:`SLICE_DATASETS`
    datasets of one lesson: each slice is one decision, taken within ``turn()`` (the
    action's: events waiting go before the next slice). A lesson is read anew for each slice,
    as an event between two slices may have changed it. A dataset judged in this slot already
    (before a restart, or by another instance) is skipped."""
    interval_ms = interval_seconds * 1000
    slot = now_ms - now_ms % interval_ms
    counts = SweepCounts()
    with turn():
        lessons = ctx.catalog.terms_under(LESSONS_NODE)
    for urn in lessons:
        datasets: list[str] | None = None  # the lesson's, read at its first slice
        for start in itertools.count(0, SLICE_DATASETS):
            with turn():
                lesson = ctx.lesson(urn)
                if lesson is None or not _scheduled(lesson):
                    break
                if (lesson.in_force_since or 0) > now_ms:
                    counts.not_in_force.append(NotInForce(urn, iso(lesson.in_force_since)))
                    break
                if datasets is None:
                    datasets = _swept_datasets(lesson, ctx)
                scope = datasets[start : start + SLICE_DATASETS]
                if not scope:
                    break
                mine = [
                    dataset
                    for dataset in scope
                    if owns(dataset)
                    and (lesson.scope_rule is None or ctx.published_by_rule(lesson, dataset))
                ]
                if mine:  # another member's slice: no decision to make here
                    decide_then_apply(
                        ctx, partial(_sweep_lesson, lesson, mine, ctx, now_ms, slot, counts)
                    )
    return counts


def _swept_datasets(lesson: Lesson, ctx: HandlerContext) -> list[str]:
    """The datasets the version in force runs on: its record's, or, for a rule, the datasets
    the rule matches (each then judged only where Reflex published it)."""
    if lesson.approved is None or lesson.scope_rule is None:
        return lesson.published_scope
    return version_datasets(lesson.approved, ctx.catalog, {})


def _scheduled(lesson: Lesson) -> bool:
    """A lesson in force whose control a schedule evaluates."""
    return (
        lesson.approved is not None
        and lesson.in_force
        and triggered_by(str(lesson.approved.control.get("type")), Trigger.SCHEDULE)
    )


def _sweep_lesson(
    lesson: Lesson,
    scope: list[str],
    ctx: HandlerContext,
    now_ms: int,
    slot: int,
    counts: SweepCounts,
) -> None:
    """Judge the lesson's control on each dataset of ``scope`` (a slice of its scope): those
    judged on recorded facts in one query (``run_controls_on_recorded``), those reading data
    one by one. The incidents B come first, then the lesson (saved once, with every
    recurrence noted), then the run events, which mark the runs done: after a crash anywhere,
    what is not marked done is judged again. They are written as one batch (one transaction)
    when the slice decided nothing else (``_in_one_write``)."""
    runs: list[MetadataChangeProposalWrapper] = []
    noted = len(lesson.recurrences)
    decided = ctx.out.mark()
    due: list[_Due] = []
    for dataset_urn in scope:
        with _one_dataset(lesson, dataset_urn, ctx, counts, runs):
            covered = covered_control(lesson, dataset_urn, ctx)
            if covered is not None:
                due += _judge(covered, dataset_urn, ctx, now_ms, slot, counts, runs)
    outcomes = run_controls_on_recorded([item.judgement for item in due])
    for item, outcome in zip(due, outcomes, strict=True):
        with _one_dataset(lesson, item.run.dataset_urn, ctx, counts, runs):
            if isinstance(outcome, ReflexError):
                item.run.record(ctx, None, str(outcome), counts, runs)
            else:
                item.run.record(ctx, outcome, None, counts, runs)
    if _in_one_write(ctx, decided, lesson if len(lesson.recurrences) > noted else None, runs):
        return
    if len(lesson.recurrences) > noted:
        ctx.out.save_lesson(lesson)
    if runs:
        ctx.out.emit(*runs)


def _in_one_write(
    ctx: HandlerContext,
    mark: int,
    noted: Lesson | None,
    runs: list[MetadataChangeProposalWrapper],
) -> bool:
    """The slice's writes as one batch, in their order: the aspects decided since ``mark``
    (its incidents B), the lesson's term when it ``noted`` recurrences (what ``SaveLesson``
    writes: ``save_lesson``), then the run events. False, deciding nothing, when the slice
    decided anything else since ``mark``: its writes then go one directive each."""
    decided = ctx.out.directives[mark:]
    if not all(isinstance(d, Emit) for d in decided):
        return False
    ctx.out.rollback(mark)
    actor = ctx.config.service_actor
    term = (
        [] if noted is None else [lesson_term_mcp(noted, lesson_title(ctx.catalog, noted), actor)]
    )
    incidents = [mcp for d in decided if isinstance(d, Emit) for mcp in d.mcps]
    if incidents or term or runs:
        ctx.out.emit(*incidents, *term, *runs)
    return True


@contextmanager
def _one_dataset(
    lesson: Lesson,
    dataset_urn: str,
    ctx: HandlerContext,
    counts: SweepCounts,
    runs: list[MetadataChangeProposalWrapper],
) -> Iterator[None]:
    """What is decided for one dataset within the block, undone when its metadata is bad:
    one dataset's bad metadata must not stop the sweep; an unreachable store does."""
    mark, written = ctx.out.mark(), len(runs)
    try:
        yield
    except CatalogError:
        raise
    except ReflexError as error:
        ctx.out.rollback(mark)
        del runs[written:]
        counts.errors += 1
        logger.error("scheduled run of %s on %s: %s", lesson.urn, dataset_urn, error)


@dataclass(frozen=True)
class _Run:
    """One run of a control on one dataset of a slice, as its run event and incident B say."""

    covered: CoveredControl
    dataset_urn: str
    run_id: str
    #: the run's time: the tick's, or the recorded fact's
    time_ms: int
    #: a control judged as of the tick keys incident B by the newest time it saw, so a table
    #: stale for days raises one incident, not one per tick
    as_of_ms: int | None = None

    def record(
        self,
        ctx: HandlerContext,
        result: ControlResult | None,
        error: str | None,
        counts: SweepCounts,
        runs: list[MetadataChangeProposalWrapper],
    ) -> None:
        newest = (result.measures or {}).get("newest") if result is not None else None
        record_run(
            self.covered, self.dataset_urn, ctx, time_ms=self.time_ms, run_id=self.run_id,
            result=result, error=error,
            incident_key=None if self.as_of_ms is None else f"stale-since-{newest}",
            deferred=runs,
        )  # fmt: skip
        _count(counts, result, error)


@dataclass(frozen=True)
class _Due:
    """A run judged on recorded facts, with the slice's others in one query."""

    run: _Run
    judgement: OnRecorded


def _judge(
    covered: CoveredControl,
    dataset_urn: str,
    ctx: HandlerContext,
    now_ms: int,
    slot: int,
    counts: SweepCounts,
    runs: list[MetadataChangeProposalWrapper],
) -> list[_Due]:
    """The control on the dataset when it is due: run here when it reads data, else the
    judgement on recorded facts to make with the slice's others."""
    control = covered.control
    if not control.judged_as_of:  # only a profile whose event was missed is news
        fact = profile_fact(ctx.catalog.latest_timeseries(dataset_urn, DatasetProfileClass))
        if (
            fact is None
            or fact.name not in control.judged_on_recorded()
            or covered.judged(fact.run_id)
        ):
            counts.skipped += 1
            return []
        run = _Run(covered, dataset_urn, fact.run_id, fact.time_ms)
        return _due(run, fact.facts, ctx, counts, runs)
    run = _Run(covered, dataset_urn, f"scheduled-{iso(slot)}", now_ms, as_of_ms=now_ms)
    if covered.judged(run.run_id):
        counts.skipped += 1
        return []
    operation = ctx.catalog.latest_timeseries(dataset_urn, OperationClass)
    if control.reads_data():
        result, error = _on_latest_snapshot(covered, dataset_urn, operation, ctx, now_ms)
        run.record(ctx, result, error, counts, runs)
        return []
    last_update = None
    if operation is not None:
        last_update = operation.lastUpdatedTimestamp or operation.timestampMillis
    return _due(run, RecordedFacts(last_updated_ms=last_update), ctx, counts, runs)


def _due(
    run: _Run,
    facts: RecordedFacts,
    ctx: HandlerContext,
    counts: SweepCounts,
    runs: list[MetadataChangeProposalWrapper],
) -> list[_Due]:
    """The judgement due on recorded facts; an ERROR run now when the earlier counts it
    compares them with cannot be read."""
    try:
        judgement = on_recorded(
            run.covered, run.dataset_urn, facts, run.run_id, ctx, as_of_ms=run.as_of_ms
        )
    except ReflexError as failure:
        run.record(ctx, None, str(failure), counts, runs)
        return []
    return [_Due(run, judgement)]


def _count(counts: SweepCounts, result: ControlResult | None, error: str | None) -> None:
    counts.judged += 1
    counts.errors += error is not None
    counts.failed += result is not None and not result.passed


def _on_latest_snapshot(
    covered: CoveredControl,
    dataset_urn: str,
    operation: OperationClass | None,
    ctx: HandlerContext,
    now_ms: int,
) -> tuple[ControlResult | None, str | None]:
    """The control, as of the tick, on the data the dataset's latest operation names, or on
    its live table when its platform has an engine (an Iceberg or Delta table's latest
    commit)."""
    dataset = ctx.catalog.dataset(dataset_urn)
    try:
        if dataset is not None and operation is not None:
            landed, snapshot_id = landed_data(operation, dataset_urn, ctx)
        else:
            landed, snapshot_id = data_at(dataset_urn, now_ms, ctx) or (None, "")
    except (SnapshotRefused, EngineError) as refusal:
        return None, str(refusal)
    if landed is None:
        return None, f"DataHub records no landed snapshot of {dataset_urn} (no operation)"
    return run_on_target(covered, dataset_urn, landed, snapshot_id, ctx, as_of_ms=now_ms)
