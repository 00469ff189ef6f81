"""Evaluate a control on every point of each candidate's history, one query (or two) each.

A history point is a target an engine reads: a snapshot file of a folder, a partition of a
table, an Iceberg snapshot, a Delta version. Points are judged independently, several at once:
a bounded pool of threads, each with its own ``engine.worker()`` (a cursor on one DuckDB
database, so the memory limit and spill folder bound them all; a connection to a server),
reading one point at a time. A control judging volume needs the counts of the points before
each one, so its points are judged in order, one at a time.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import TypeVar

from reflex_actions.backtest.history import (
    FailureLabel,
    History,
    HistoryPoint,
    last_changed_ms,
)
from reflex_actions.backtest.metrics import (
    BacktestReport,
    DatasetBacktest,
    Scores,
    SnapshotOutcome,
)
from reflex_actions.controls import Control
from reflex_actions.engines.base import Engine, Evaluation, Target
from reflex_actions.engines.rendering import RenderedControl, batched, rendered
from reflex_actions.errors import ReflexError, SnapshotError, SnapshotUnreadableError
from reflex_actions.executor import (
    ReferenceSnapshot,
    counts_of_each,
    recent_counts,
    with_reference,
)
from reflex_actions.registry import kind_for_control
from reflex_actions.sql import RecordedFacts, Relation

DEFAULT_SAMPLE_SIZE = 3
#: DuckDB spills aggregates to disk beyond this, keeping a backtest's memory bounded.
DEFAULT_MEMORY_LIMIT = "768MB"
#: A memory limit as DuckDB reads one: a size in decimal or binary units (768MB, 1.5GiB).
_MEMORY_LIMIT = re.compile(r"\s*(\d{1,12}(?:\.\d{1,6})?)\s*([KMGT])(I?)B\s*", re.IGNORECASE)
#: Below this DuckDB fails even a small aggregate (it allocates blocks of 256 KiB per thread).
MIN_MEMORY_LIMIT_BYTES = 64 * 1000**2
#: Above this (a petabyte) a limit is a typing error, not a machine's memory.
MAX_MEMORY_LIMIT_BYTES = 1000**5


def validate_memory_limit(limit: str) -> str:
    """``limit`` if it is a memory limit a backtest can run within, as DuckDB reads it (DuckDB
    itself only fails at connect); a ValueError saying what is wrong otherwise. The one check
    of ``backtest.memory_limit`` and of ``backtest --memory-limit``."""
    match = _MEMORY_LIMIT.fullmatch(limit)
    if match is None:
        raise ValueError(
            f"memory limit {limit[:40]!r} is not a size like 768MB or 2GiB "
            "(units KB, MB, GB, TB or KiB, MiB, GiB, TiB)"
        )
    number, unit, binary = match.groups()
    base = 1024 if binary else 1000
    size = float(number) * base ** ("KMGT".index(unit.upper()) + 1)
    if not MIN_MEMORY_LIMIT_BYTES <= size <= MAX_MEMORY_LIMIT_BYTES:
        raise ValueError(f"memory limit {limit.strip()!r} is not between 64MB and 1000TB")
    return limit


#: Snapshots judged at once: one per core. A snapshot of one row group is scanned by one
#: thread, so one query at a time leaves cores idle; more than one per core only contends
#: (bench/RESULTS.md, "Backtest": 2 cores, 365 snapshots, 1-6 workers).
DEFAULT_WORKERS = os.cpu_count() or 1

#: Called with (dataset, fraction of its snapshots judged) as each snapshot is judged.
ProgressCallback = Callable[[str, float], None]


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


class WorkerPool:
    """At most ``size`` threads judging at once, each on its own worker of one engine, opened on
    its first task (a cursor on one DuckDB database: one memory limit and one spill folder bound
    them all; a worker reads one point at a time)."""

    def __init__(self, engine: Engine, size: int) -> None:
        self.engine = engine
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="reflex-backtest")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._workers: list[Engine] = []

    def _worker(self) -> Engine:
        """This thread's worker, opened on its first task."""
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self.engine.worker()
            self._local.worker = worker
            with self._lock:
                self._workers.append(worker)
        return worker

    def _run(self, task: Callable[[Engine, _Item], _Result], item: _Item) -> _Result:
        return task(self._worker(), item)

    def map(
        self,
        task: Callable[[Engine, _Item], _Result],
        items: Sequence[_Item],
        done: Callable[[int], None] | None = None,
    ) -> list[_Result]:
        """``task(worker, item)`` for every item, several at once; results in ``items`` order.
        ``done`` is called on this thread with how many have finished, as each finishes."""
        futures: list[Future[_Result]] = [
            self._executor.submit(self._run, task, item) for item in items
        ]
        if done is not None:
            for count, _ in enumerate(as_completed(futures), start=1):
                done(count)
        return [future.result() for future in futures]

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        for worker in self._workers:
            worker.close()


@contextmanager
def embedded_engine(memory_limit: str = DEFAULT_MEMORY_LIMIT) -> Iterator[Engine]:
    """The embedded engine a backtest runs on: one DuckDB database with the memory limit and a
    temporary spill folder, shared by its workers. It keeps the Parquet footers it parsed
    (checked against each file's modification time): a footer read ahead is not parsed again by
    the file's own query (~13 % of a 100k-row count)."""
    from reflex_actions.engines.duckdb import DuckDBEngine
    from reflex_actions.snapshots import duckdb_connection

    with tempfile.TemporaryDirectory(prefix="reflex-backtest-") as spill_dir:
        con = duckdb_connection(
            memory_limit=memory_limit, temp_directory=spill_dir, preserve_insertion_order=False
        )
        try:
            # a setting of the parquet extension: set once the connection has loaded it
            con.execute("SET parquet_metadata_cache = true")
            yield DuckDBEngine(con)
        finally:
            con.close()


@contextmanager
def _pool(
    engine: Engine | None,
    memory_limit: str,
    workers: int,
    targets: Sequence[Target],
    types: bool = True,
) -> Iterator[WorkerPool]:
    """A pool of ``workers`` on ``engine`` (the caller's to close), or on the embedded one,
    reading ``targets`` (every point judged) ahead, their column types only with ``types``."""
    with embedded_engine(memory_limit) if engine is None else nullcontext(engine) as used:
        pool = WorkerPool(used.reading_ahead(targets, types), workers)
        try:
            yield pool
        finally:
            pool.close()


def backtest(
    control: Control,
    histories: Sequence[History],
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    progress: ProgressCallback | None = None,
    controls_by_dataset: Mapping[str, Control] | None = None,
    references: Mapping[str, History] | None = None,
    workers: int = DEFAULT_WORKERS,
    engine: Engine | None = None,
) -> BacktestReport:
    """Backtest ``control`` on each history and score it against the histories' labels.

    ``controls_by_dataset`` overrides the control for some datasets (by history dataset name),
    e.g. the same uniqueness check on a dataset that names the key differently. ``references``
    holds the histories of the datasets a referencing control checks against (by dataset urn),
    read by ``engine`` too: each child point is paired with the parent's point
    :meth:`History.reference_for` gives (a folder's snapshot of the same id, or its latest one
    before it; a table's partition of the same value). ``workers`` points are judged at once, on
    ``engine`` (the embedded DuckDB engine, bounded by ``memory_limit``, when None).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ReflexError(f"backtest workers must be a whole number of at least 1, not {workers!r}")
    started = time.perf_counter()
    datasets: list[DatasetBacktest] = []
    outcomes: list[SnapshotOutcome] = []
    read = [*histories, *(references or {}).values()]
    targets = [point.target for history in read for point in history.points]
    # a control judged on a row count alone (volume) reads no column: no types are read ahead
    counted = [control, *(controls_by_dataset or {}).values()]
    types = bool(references) or any(
        c.judged_on_recorded() != {"row_count"} or c.referenced() for c in counted
    )
    with _pool(engine, memory_limit, workers, targets, types) as pool:
        _check_reads(pool.engine, histories)
        for history in histories:
            own_control = (controls_by_dataset or {}).get(history.dataset, control)
            dataset, dataset_outcomes = _backtest_history(
                pool, own_control, history, sample_size, progress, references or {}
            )
            datasets.append(dataset)
            outcomes.extend(dataset_outcomes)
    return BacktestReport(
        control_type=control.type,
        control=control.describe(),
        spec=control.model_dump(mode="json", exclude_defaults=True) | {"type": control.type},
        datasets=datasets,
        per_snapshot=outcomes,
        elapsed_ms=_elapsed_ms(started),
        **Scores.compute(
            outcomes,
            candidate_assets=len(datasets),
            applicable_assets=sum(dataset.applicable for dataset in datasets),
        ),
    )


def _check_reads(engine: Engine, histories: Sequence[History]) -> None:
    """Every history's points must be targets ``engine`` reads: bad input otherwise."""
    for history in histories:
        for point in history.points[:1]:
            if not engine.supports(point.target):
                raise ReflexError(
                    f"the {engine.name} engine does not read the history of {history.dataset} "
                    f"({history.shown[:200]})"
                )


@dataclass(frozen=True)
class _Judgement:
    """One point to judge and what it is judged with: the parent snapshot it is paired with
    (a referencing control), the time it is judged as of and the dataset's last update then
    (a control judged as of a time)."""

    #: the point judged (named as the snapshot it is)
    snapshot: HistoryPoint
    reference: ReferenceSnapshot | None = None
    #: the parent point ``reference`` reads, as the outcome names it
    checked_against: str | None = None
    as_of_ms: int | None = None
    last_updated_ms: int | None = None


def _backtest_history(
    pool: WorkerPool,
    control: Control,
    history: History,
    sample_size: int,
    progress: ProgressCallback | None,
    references: Mapping[str, History],
) -> tuple[DatasetBacktest, list[SnapshotOutcome]]:
    started = time.perf_counter()
    unusable: dict[str, str] = {}
    target = control.referenced()
    parent = references.get(target.dataset) if target else None
    points = history.points
    if target is not None and parent is None:
        judgements = []
        for point in points:
            unusable[point.snapshot_id] = f"no history of {target.dataset}, which it references"
    else:
        judgements = _judgements(control, history, parent, unusable)
    raw: dict[str, Evaluation] = {}
    judged = _judge_all(pool, control, judgements, sample_size, history.dataset, progress)
    for snapshot_id, result in judged.items():
        if isinstance(result, str):
            unusable[snapshot_id] = result
        else:
            raw[snapshot_id] = result
    checked_against = {j.snapshot.snapshot_id: j.checked_against for j in judgements}
    # a label naming a kind counts only for that kind's controls: only then is the control's
    # kind looked up (loading every registered kind costs a fresh process ~0.2 s)
    named = any(label.kind is not None for label in history.labels.values())
    kind = kind_for_control(control.type) if named else None
    labels = history.labels_for(kind.pattern if kind else None)
    outcomes = [
        _outcome(
            control,
            history,
            labels,
            point,
            raw.get(point.snapshot_id),
            unusable,
            checked_against.get(point.snapshot_id),
        )
        for point in points
    ]
    applicable = any(outcome.evaluable for outcome in outcomes)
    reason = None
    if not points:
        reason = history.unreadable or f"no snapshots in {history.shown}"
    elif not applicable:
        reason = "no snapshot could be evaluated: " + next(iter(unusable.values()))
    dataset = DatasetBacktest(
        dataset=history.dataset,
        history=history.shown,
        applicable=applicable,
        reason=reason,
        labels_without_snapshot=history.labels_without_snapshot(),
        elapsed_ms=_elapsed_ms(started),
        **Scores.compute(outcomes, candidate_assets=1, applicable_assets=int(applicable)),
    )
    return dataset, outcomes


def _on_last_update(control: Control) -> bool:
    """Whether the control is judged on the dataset's last update (replayed in a backtest)."""
    return "last_updated_ms" in control.judged_on_recorded()


def _judgements(
    control: Control, history: History, parent: History | None, unusable: dict[str, str]
) -> list[_Judgement]:
    """The points to judge, each as a landing run would have judged it: against its paired
    snapshot of the ``parent`` history (a child point with none to pair is not evaluable),
    and as of the time it was taken for a control judged as of a time (with the dataset's last
    update replayed from the history: the first of the points since its content last
    changed). Those that cannot be judged get their reason in ``unusable``."""
    judgements = []
    # the replay reads every file's bytes: only for a control judged on the last update
    last_updates = last_changed_ms(history) if _on_last_update(control) else {}
    for point in history.points:
        snapshot_id = point.snapshot_id
        as_of = history.as_of_ms(snapshot_id) if control.judged_as_of else None
        if control.judged_as_of and as_of is None:
            unusable[snapshot_id] = (
                f"snapshot id {snapshot_id!r} is not a time and labels.yaml gives no "
                "snapshot_times entry for it: it cannot be judged as of when it was taken"
            )
            continue
        reference, checked_against = None, None
        if parent is not None:
            paired = parent.reference_for(snapshot_id)
            if paired is None:
                unusable[snapshot_id] = (
                    f"{parent.dataset}, which it references, is {parent.unreadable}"
                    if parent.unreadable
                    else f"no snapshot of {parent.dataset} at or before {snapshot_id}"
                )
                continue
            paired_point, chosen = paired
            reference = ReferenceSnapshot(paired_point.target, chosen)
            checked_against = f"{parent.dataset} {paired_point.snapshot_id} ({chosen})"
        judgements.append(
            _Judgement(
                snapshot=point,
                reference=reference,
                checked_against=checked_against,
                as_of_ms=as_of,
                last_updated_ms=last_updates.get(snapshot_id),
            )
        )
    return judgements


def _judge_all(
    pool: WorkerPool,
    control: Control,
    judgements: list[_Judgement],
    sample_size: int,
    dataset: str,
    progress: ProgressCallback | None,
) -> dict[str, Evaluation | str]:
    """Each point's raw result, or why it is not evaluable, by snapshot id.

    Independent points are judged several at once; a control judging volume is judged on
    one point after another, each against the row counts of the evaluable ones before it.
    """

    def report(done: int) -> None:
        if progress is not None:
            progress(dataset, done / len(judgements))

    at_once = _judged_in_batches(pool.engine, control, judgements, sample_size)
    if at_once is not None:
        report(len(judgements))
        judged = at_once
    elif not control.earlier_counts_needed():
        judged = pool.map(
            lambda worker, judgement: _judge(worker, control, judgement, sample_size, ()),
            judgements,
            report,
        )
    else:
        judged, counts = [], []
        for done, judgement in enumerate(judgements, start=1):
            earlier = recent_counts(control, counts)
            judged.append(_judge(pool.engine, control, judgement, sample_size, earlier))
            if not isinstance(judged[-1], str):
                counts.append(judged[-1].rows_scanned)
            report(done)
    return {j.snapshot.snapshot_id: result for j, result in zip(judgements, judged, strict=True)}


#: Points judged in one query at most (each binds a handful of values).
BATCH_SIZE = 500


def _judged_in_batches(
    engine: Engine, control: Control, judgements: list[_Judgement], sample_size: int
) -> list[Evaluation | str] | None:
    """Each point's result, the points whose counts read no rows (a volume control on the
    count its footer gave, read ahead: planning a query costs more than the footer's count)
    judged in one query per ``BATCH_SIZE`` of them, any other point of a control judged in
    order on its own in its turn; None for a control judged on more than a row count, for
    independent points not all counted by footers, and when a batch fails or a point's count
    is not its footer's (every point is then judged on its own, saying why). A volume
    control's earlier counts are its earlier points' (a footer's is its query's count)."""
    if engine.name != "duckdb" or "row_count" not in control.judged_on_recorded():
        return None
    judged: list[Evaluation | str | None] = [None] * len(judgements)
    group: list[tuple[int, Relation, RenderedControl]] = []
    counts: list[int] = []
    for index, judgement in enumerate(judgements):
        earlier = recent_counts(control, counts) if control.earlier_counts_needed() else ()
        relation = _relation(engine, control, judgement, earlier)
        if isinstance(relation, str):
            judged[index] = relation
            continue
        query = rendered(control, relation, sample_size, engine.dialect)
        alike = not group or query.counts.sql == group[0][2].counts.sql
        if relation.footer_rows is None or not alike:
            if not control.earlier_counts_needed():
                return None  # independent points: the pool judges them several at once
            judged[index] = result = _evaluated(
                engine, control, relation, sample_size, judgement.snapshot.target
            )
            if not isinstance(result, str):
                counts.append(result.rows_scanned)
            continue
        if batched(query.counts, engine.dialect).reads_tables:
            return None
        group.append((index, relation, query))
        counts.append(relation.footer_rows)
    for start in range(0, len(group), BATCH_SIZE):
        part = group[start : start + BATCH_SIZE]
        try:
            rows = counts_of_each(engine, part)
            for (index, relation, query), row in zip(part, rows, strict=True):
                evaluation = engine.judged(control, relation, query, row)
                if evaluation.rows_scanned != relation.footer_rows:
                    return None
                judged[index] = evaluation
        except SnapshotError:
            return None
    return [result for result in judged if result is not None]


def _relation(
    engine: Engine, control: Control, judgement: _Judgement, earlier_counts: tuple[int, ...]
) -> Relation | str:
    """How the point is read (its own column types, as ``run_control`` reads them), with what
    it is judged against, or why it cannot be: a missing column, an unreadable target."""
    try:
        return replace(
            with_reference(
                engine,
                control,
                engine.relation(judgement.snapshot.target, control.required_columns()),
                judgement.reference,
            ),
            earlier_counts=earlier_counts,
            as_of_ms=judgement.as_of_ms,
            recorded=RecordedFacts(last_updated_ms=judgement.last_updated_ms)
            if _on_last_update(control)
            else None,
        )
    except SnapshotError as error:
        return str(error)


def _judge(
    engine: Engine,
    control: Control,
    judgement: _Judgement,
    sample_size: int,
    earlier_counts: tuple[int, ...],
) -> Evaluation | str:
    """The control's result on one point, or why it cannot be evaluated: a missing column, an
    unreadable target or the engine's reason for failing on its data."""
    relation = _relation(engine, control, judgement, earlier_counts)
    if isinstance(relation, str):
        return relation
    return _evaluated(engine, control, relation, sample_size, judgement.snapshot.target)


def _evaluated(
    engine: Engine,
    control: Control,
    relation: Relation,
    sample_size: int,
    target: Target,
) -> Evaluation | str:
    """The control's result on the point read as ``relation``, or the engine's reason for
    failing on its data."""
    try:
        return engine.evaluate(control, relation, sample_size)
    except SnapshotUnreadableError as error:
        return f"cannot evaluate snapshot {target.shown}: {error}"
    except SnapshotError as error:
        return str(error)


def _outcome(
    control: Control,
    history: History,
    labels: Mapping[str, FailureLabel],
    point: HistoryPoint,
    raw: Evaluation | None,
    unusable: dict[str, str],
    checked_against: str | None,
) -> SnapshotOutcome:
    label = labels.get(point.snapshot_id)
    common = {
        "checked_against": checked_against,
        "dataset": history.dataset,
        "snapshot_id": point.snapshot_id,
        "path": point.target.shown,
        "labelled_failure": label is not None,
        "incident": label.incident if label else None,
    }
    if raw is None:
        reason = unusable.get(point.snapshot_id, "not evaluated")
        return SnapshotOutcome(**common, evaluable=False, reason=reason, verdict="not_evaluable")
    flagged = raw.violation_count > control.allowed_violations(raw.rows_scanned)
    return SnapshotOutcome(
        **common,
        evaluable=True,
        flagged=flagged,
        violation_count=raw.violation_count,
        rows_scanned=raw.rows_scanned,
        sample=[control.sample_row(row) for row in raw.sample],
        measures=None if raw.measures is None else control.sample_row(raw.measures),
        verdict=SnapshotOutcome.verdict_for(flagged, label is not None),
    )


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
