"""A covered dataset's control runs, whatever triggered them (data landed, a fact DataHub
recorded, the schedule): the controls covering it, where its data is, a run on it or on a
recorded fact, and its run event (with incident B on a failure)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    AssertionRunEventClass,
    DatasetProfileClass,
    OperationClass,
)

from reflex_actions.backtest.history import row_counts
from reflex_actions.bounded import excerpt
from reflex_actions.controls import Control, parse_control_yaml
from reflex_actions.controls.base import MAX_COUNT
from reflex_actions.engines.base import Engine, FileTarget, TableTarget, Target
from reflex_actions.engines.lakehouse import commit_at
from reflex_actions.errors import ReflexError
from reflex_actions.executor import (
    ControlResult,
    OnRecorded,
    ReferenceSnapshot,
    run_control,
    run_controls_on_recorded,
)
from reflex_actions.handlers.assertions import (
    CONTROL_PROPERTY,
    assertion_urn,
    record_recurrence,
    row_counts_after,
    run_event_mcp,
)
from reflex_actions.handlers.change import MalformedEvent
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.landing import (
    DEFAULT_PARTITION,
    SnapshotRefused,
    locate_snapshot,
    parent_snapshot,
)
from reflex_actions.handlers.lesson_store import lesson_title
from reflex_actions.handlers.own_runs import OwnRuns
from reflex_actions.kinds.base import Trigger
from reflex_actions.lessons.model import Lesson
from reflex_actions.registry import triggered_by
from reflex_actions.sql import RecordedFacts
from reflex_actions.times import believed_time, iso
from reflex_actions.vocabulary import display_name

logger = logging.getLogger(__name__)


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


def _earlier_counts(covered: CoveredControl, dataset_urn: str, ctx: HandlerContext) -> list[int]:
    """The row counts a control judging volume compares a landing with: those its assertion's
    runs carried forward, else (its first run) the normal snapshots of the dataset's history."""
    if not covered.control.earlier_counts_needed():
        return []
    counts = row_counts_after(covered.last_run)
    history = ctx.histories.history_for(dataset_urn) if not counts else None
    if history is not None:
        counts = [n for sid, n in row_counts(history).items() if sid not in history.labels]
    return counts


@dataclass(frozen=True)
class CoveredControl:
    """A published lesson's control on one dataset, as its assertion holds it."""

    lesson: Lesson
    assertion: str
    control: Control
    runs: OwnRuns = field(repr=False, compare=False)

    @cached_property
    def last_run(self) -> AssertionRunEventClass | None:
        """Reflex's own latest run of the assertion, read once per decision: the row counts
        it carries forward come from it."""
        return self.runs.latest(self.assertion)

    def judged(self, run_id: str) -> bool:
        """Whether Reflex already judged this run id here (a redelivered or replayed event)."""
        return self.runs.judged(self.assertion, run_id)


def covered_controls(
    dataset_urn: str, ctx: HandlerContext, as_of: int, trigger: Trigger
) -> Iterator[CoveredControl]:
    """The controls covering the dataset (published by ``as_of``) that ``trigger`` evaluates."""
    for lesson in ctx.published_lessons(dataset_urn, as_of=as_of):
        covered = covered_control(lesson, dataset_urn, ctx)
        if covered is not None and triggered_by(covered.control.type, trigger):
            yield covered


def covered_control(lesson: Lesson, dataset_urn: str, ctx: HandlerContext) -> CoveredControl | None:
    assertion = assertion_urn(lesson.urn, dataset_urn)
    info = ctx.catalog.get_aspect(assertion, AssertionInfoClass)
    if info is None or CONTROL_PROPERTY not in (info.customProperties or {}):
        logger.warning("lesson %s covers %s but its assertion is missing", lesson.urn, dataset_urn)
        return None
    return CoveredControl(
        lesson, assertion, parse_control_yaml(info.customProperties[CONTROL_PROPERTY]), ctx.runs
    )


def record_run(
    covered: CoveredControl,
    dataset_urn: str,
    ctx: HandlerContext,
    *,
    time_ms: int,
    run_id: str,
    result: ControlResult | None,
    error: str | None,
    incident_key: str | None = None,
    deferred: list[MetadataChangeProposalWrapper] | None = None,
) -> None:
    """Incident B when the control failed (keyed by ``incident_key``, else the run id), then
    the run event, last: it marks the run as judged (``CoveredControl.judged``). With
    ``deferred`` (a sweep over a lesson's scope), the run event is added there and the caller
    saves the lesson once, before writing them. ``time_ms`` is a writer's (an operation's, a
    profile's): ahead of Reflex's clock, the run is dated now."""
    actor = ctx.config.service_actor
    time_ms = believed_time(time_ms, ctx.clock(), f"the data judged on {dataset_urn}")
    if result is not None and not result.passed:
        incident = record_recurrence(
            ctx.catalog,
            ctx.out,
            covered.lesson,
            lesson_title(ctx.catalog, covered.lesson),
            covered.assertion,
            dataset_urn,
            incident_key or run_id,
            result,
            time_ms,
            actor,
        )
        if deferred is None:
            ctx.out.save_lesson(covered.lesson)
        logger.info(
            "incident %s raised on %s (lesson %s)", incident, dataset_urn, covered.lesson.urn
        )
    carried = (
        row_counts_after(covered.last_run)
        if result is None and covered.control.earlier_counts_needed()
        else None
    )
    run = run_event_mcp(
        covered.assertion, dataset_urn, time_ms, run_id, result, error, actor, ctx.runs, carried
    )
    if deferred is None:
        ctx.out.emit(run)
    else:
        deferred.append(run)


def judge_recorded(
    covered: CoveredControl,
    dataset_urn: str,
    recorded: RecordedFacts,
    run_id: str,
    ctx: HandlerContext,
) -> tuple[ControlResult | None, str | None]:
    """The control judged on what DataHub records of the dataset, or why it could not be."""
    try:
        judgement = on_recorded(covered, dataset_urn, recorded, run_id, ctx)
    except ReflexError as failure:
        return None, str(failure)
    (outcome,) = run_controls_on_recorded([judgement])
    return (None, str(outcome)) if isinstance(outcome, ReflexError) else (outcome, None)


def on_recorded(
    covered: CoveredControl,
    dataset_urn: str,
    recorded: RecordedFacts,
    run_id: str,
    ctx: HandlerContext,
    *,
    as_of_ms: int | None = None,
) -> OnRecorded:
    """The control to judge on what DataHub records of the dataset, with the earlier counts
    it compares them with (raise ReflexError when they cannot be read)."""
    earlier = _earlier_counts(covered, dataset_urn, ctx)
    return OnRecorded(covered.control, recorded, run_id, tuple(earlier), as_of_ms)


def landed_data(
    operation: OperationClass, urn: str, ctx: HandlerContext
) -> tuple[tuple[Engine | None, Target] | None, str]:
    """Where the operation's data is (an engine, None for the embedded DuckDB on files, and
    the target) and the run's id; None when there is nothing Reflex can read."""
    properties = operation.customProperties or {}
    partition = operation.partitionSpec.partition if operation.partitionSpec else DEFAULT_PARTITION
    names_file = properties.get("snapshot") or properties.get("snapshot_id")
    if not names_file:
        named = None if partition == DEFAULT_PARTITION else partition
        found = data_at(urn, operation.timestampMillis, ctx, partition=named)
        if found is not None:
            return found
        if names_no_data(operation):
            return None, ""
    path, snapshot_id = locate_snapshot(operation, urn, ctx.config.landing)
    return (None, FileTarget(path)), snapshot_id


def data_at(
    urn: str, at_ms: int, ctx: HandlerContext, *, partition: str | None = None
) -> tuple[tuple[Engine | None, Target], str] | None:
    """Where the dataset's rows are at ``at_ms`` when no file names them, and the run's id:
    on a platform with an engine its table (or the partition holding ``partition``), for an
    Iceberg or Delta dataset its table at the commit that was its latest then (read by the
    embedded engine); None when neither is configured. Raise SnapshotRefused when the
    lakehouse table cannot be read or had no commit by then."""
    on_table = ctx.histories.table_of(urn, partition)
    if on_table is not None:
        engine, table = on_table
        return (engine, table), table.partition or f"live-{iso(at_ms)}"
    lakehouse = ctx.histories.lakehouse_table(urn)
    if lakehouse is None:
        return None
    try:
        commit = commit_at(lakehouse, at_ms)
    except ReflexError as error:
        raise SnapshotRefused(str(error)) from None
    return (None, commit), commit.snapshot_id


def run_on_target(
    covered: CoveredControl,
    dataset_urn: str,
    landed: tuple[Engine | None, Target],
    snapshot_id: str,
    ctx: HandlerContext,
    *,
    as_of_ms: int,
) -> tuple[ControlResult | None, str | None]:
    """The control run on landed data (against its parent's snapshot, and its earlier
    counts), or why it could not be: a corrupt or drifted snapshot is an ERROR run, never
    incident B."""
    engine, target = landed
    try:
        parent = (
            parent_snapshot(
                covered.control, snapshot_id, ctx.config.landing, ctx.histories.history_for
            )
            if isinstance(target, FileTarget)
            else _parent_table(covered.control, engine, target, ctx)
        )
        earlier = _earlier_counts(covered, dataset_urn, ctx)
        result = run_control(
            covered.control,
            target,
            engine=engine,
            reference=parent,
            earlier_counts=earlier,
            as_of_ms=as_of_ms,
        )
    except ReflexError as failure:
        return None, str(failure)
    return result, None


def _parent_table(
    control: Control, engine: Engine | None, target: Target, ctx: HandlerContext
) -> ReferenceSnapshot | None:
    """A table's parent, for a control checked against another dataset: the referenced
    dataset's table on the same engine (its partition of the same value, when the child's is
    one), as one query reads both. Raise SnapshotRefused when it has none there."""
    referenced = control.referenced()
    if referenced is None:
        return None
    partition = target.partition if isinstance(target, TableTarget) else None
    on_table = ctx.histories.table_of(referenced.dataset, partition)
    if on_table is None or on_table[0] is not engine:
        raise SnapshotRefused(
            f"{display_name(referenced.dataset)}, the dataset this control references, is not "
            f"on the engine {target.shown} is read on: both must be read by one query"
        )
    chosen = "the same partition" if partition is not None else "the live table"
    return ReferenceSnapshot(on_table[1], chosen)


@dataclass(frozen=True)
class RecordedFact:
    """One fact DataHub recorded about a dataset, as a control judged on it reads it."""

    #: the ``RecordedFacts`` field it fills (what ``Control.judged_on_recorded`` names)
    name: str
    facts: RecordedFacts
    #: when DataHub recorded it: the run's time, so a fact is judged once
    time_ms: int
    run_id: str


def profile_fact(profile: DatasetProfileClass | None) -> RecordedFact | None:
    """A profile's row count; a count no table holds is a malformed event, judged nowhere."""
    if profile is None or profile.rowCount is None:
        return None
    if not 0 <= profile.rowCount <= MAX_COUNT:
        raise MalformedEvent(
            f"datasetProfile.rowCount {excerpt(profile.rowCount)} is not a row count "
            f"(0 to {MAX_COUNT})"
        )
    return RecordedFact(
        "row_count",
        RecordedFacts(row_count=profile.rowCount),
        profile.timestampMillis,
        f"profile-{iso(profile.timestampMillis)}",
    )


def judge_fact(
    covered: CoveredControl,
    dataset_urn: str,
    fact: RecordedFact,
    ctx: HandlerContext,
    deferred: list[MetadataChangeProposalWrapper] | None = None,
) -> tuple[ControlResult | None, str | None]:
    """One control judged on one recorded fact (the caller checks it was not judged yet: a
    fact is judged once, at its own time); its result, or why there is none."""
    result, error = judge_recorded(covered, dataset_urn, fact.facts, fact.run_id, ctx)
    record_run(
        covered,
        dataset_urn,
        ctx,
        time_ms=fact.time_ms,
        run_id=fact.run_id,
        result=result,
        error=error,
        deferred=deferred,
    )
    return result, error
