"""Run a control on one snapshot file and report the outcome."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from reflex_actions.controls import Control
from reflex_actions.engines.base import (
    DeltaTarget,
    Engine,
    Evaluation,
    FileTarget,
    IcebergTarget,
    TableTarget,
    Target,
)
from reflex_actions.engines.rendering import RenderedControl, batched, rendered
from reflex_actions.errors import (
    ControlSpecError,
    ReflexError,
    SnapshotNotFoundError,
    SnapshotUnreadableError,
)
from reflex_actions.snapshots import SnapshotFile, duckdb_connection
from reflex_actions.sql import NO_ROWS, RecordedFacts, Relation

# DuckDB is imported where a query runs: importing the executor (for its constants, as the
# CLI's `control compile` does) starts no engine.
if TYPE_CHECKING:
    import duckdb

    from reflex_actions.engines.duckdb import DuckDBEngine

DEFAULT_SAMPLE_SIZE = 5
#: The parameter a parent's snapshot is bound to beside the child's ``$snapshot``.
REFERENCE_PARAMETER = "reference"


@dataclass(frozen=True)
class ReferenceSnapshot:
    """The parent snapshot a referencing control is checked against, and how it was chosen
    (e.g. "the same snapshot id", "the latest at or before 2026-09-04", "given"): a snapshot
    file, or any target of the engine the child runs on (a table, one partition of it)."""

    file: SnapshotFile | Target
    chosen: str

    @property
    def target(self) -> Target:
        """The parent as its engine reads it."""
        return FileTarget(self.file.path) if isinstance(self.file, SnapshotFile) else self.file


class ReferenceUsed(BaseModel):
    """Which parent snapshot a result was computed against, as reported to people."""

    dataset: str
    snapshot: str
    snapshot_id: str
    chosen: str


def with_reference(
    engine: Engine,
    control: Control,
    relation: Relation,
    reference: ReferenceSnapshot | None,
) -> Relation:
    """``relation`` with the parent's snapshot attached when ``control`` checks against one;
    raise a SnapshotError when that snapshot is missing or lacks the referenced field."""
    target = control.referenced()
    if target is None:
        return relation
    if reference is None:
        raise SnapshotNotFoundError(
            f"{control.type} checks values against {target.field!r} of {target.dataset}: "
            "no snapshot of that dataset was given"
        )
    parent = engine.relation(reference.target, [target.field], REFERENCE_PARAMETER)
    return replace(relation, reference=parent)


def recent_counts(control: Control, counts: Sequence[int]) -> tuple[int, ...]:
    """The last counts ``control`` judges against (none for a control that needs none)."""
    needed = control.earlier_counts_needed()
    return tuple(counts[-needed:]) if needed else ()


def reference_used(control: Control, reference: ReferenceSnapshot | None) -> ReferenceUsed | None:
    target = control.referenced()
    if target is None or reference is None:
        return None
    return ReferenceUsed(
        dataset=target.dataset,
        snapshot=reference.target.shown,
        snapshot_id=reference.target.snapshot_id,
        chosen=reference.chosen,
    )


class ControlResult(BaseModel):
    """The outcome of one control on one snapshot."""

    control_type: str
    control: str
    snapshot: str
    snapshot_id: str
    passed: bool
    violation_count: int
    #: what one violation counts, e.g. "duplicate rows"
    violation_unit: str
    allowed_violations: int
    rows_scanned: int
    sample: list[dict[str, Any]]
    #: the parent snapshot the values were checked against (referencing controls only)
    reference: ReferenceUsed | None = None
    #: the earlier row counts it was judged against, oldest first; None for a control that
    #: judges none (see ``Control.earlier_counts_needed``)
    earlier_counts: list[int] | None = None
    #: what a control judging the whole table measured, pass or fail (a freshness control's
    #: age and bound, a volume control's count and bounds); None for controls reporting none
    measures: dict[str, Any] | None = None
    elapsed_ms: float


def run_control(
    control: Control,
    target: str | Path | Target,
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    engine: Engine | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    reference: ReferenceSnapshot | None = None,
    earlier_counts: Sequence[int] = (),
    as_of_ms: int | None = None,
) -> ControlResult:
    """Evaluate ``control`` on the target (a snapshot file's path, or any target of
    ``engine``; against ``reference``, the parent's snapshot, for a control checked against
    another dataset; against ``earlier_counts``, oldest first, for one judging volume; as of
    ``as_of_ms``, for one judging age); raise a SnapshotError if it cannot be evaluated."""
    started = time.perf_counter()
    if not control.reads_data():
        raise ControlSpecError(
            f"{control.describe()} is judged on what DataHub records of the dataset, not on a "
            "snapshot's rows: it runs on the catalog (datahub-reflex evaluate)"
        )
    as_of_ms = _judged_at(control, as_of_ms)
    if not isinstance(target, (FileTarget, TableTarget, IcebergTarget, DeltaTarget)):
        target = FileTarget(SnapshotFile.from_path(target).path)
    with _runner(engine, connection) as runner:
        relation = replace(
            with_reference(
                runner, control, runner.relation(target, control.required_columns()), reference
            ),
            earlier_counts=recent_counts(control, earlier_counts),
            as_of_ms=as_of_ms,
        )
        result = _evaluate(runner, control, relation, target, sample_size, started)
        return result.model_copy(update={"reference": reference_used(control, reference)})


@contextmanager
def _runner(
    engine: Engine | None, connection: duckdb.DuckDBPyConnection | None
) -> Iterator[Engine]:
    """The engine a run reads its target with: the one given, else the embedded DuckDB on the
    connection given, else on a cursor of the process's own database (a landing runs each
    covered control on one: a new database costs ~20 ms, a cursor well under one)."""
    from reflex_actions.engines.duckdb import DuckDBEngine

    if engine is not None:
        yield engine
    elif connection is not None:
        runner = DuckDBEngine(connection)
        try:
            yield runner
        finally:
            runner.close()
    else:
        with _in_memory() as embedded:
            yield embedded


def run_control_on_recorded(
    control: Control,
    recorded: RecordedFacts,
    snapshot_id: str,
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    earlier_counts: Sequence[int] = (),
    as_of_ms: int | None = None,
) -> ControlResult:
    """Evaluate ``control`` on what DataHub records of a table (its profile's row count, its
    last update, its schema), reading no data; raise a SnapshotError naming what is missing."""
    judgement = OnRecorded(control, recorded, snapshot_id, tuple(earlier_counts), as_of_ms)
    (outcome,) = run_controls_on_recorded([judgement], sample_size=sample_size)
    if isinstance(outcome, ReflexError):
        raise outcome
    return outcome


@dataclass(frozen=True)
class OnRecorded:
    """One control to judge on what DataHub records of one table (``run_control_on_recorded``)."""

    control: Control
    recorded: RecordedFacts
    snapshot_id: str
    earlier_counts: tuple[int, ...] = ()
    as_of_ms: int | None = None


def run_controls_on_recorded(
    judgements: Sequence[OnRecorded], *, sample_size: int = DEFAULT_SAMPLE_SIZE
) -> list[ControlResult | ReflexError]:
    """Each judgement's result, or the error saying why it has none, in their order. Those
    whose controls compile to one query (one control, facts known alike) are judged in one
    query (``BatchedCounts``): a sweep judges a slice of datasets at the cost of one."""
    started = time.perf_counter()
    outcomes: list[ControlResult | ReflexError | None] = [None] * len(judgements)
    with _in_memory() as engine:
        alike: dict[str, list[tuple[int, Relation, RenderedControl]]] = {}
        for index, judgement in enumerate(judgements):
            try:
                relation = Relation.of(
                    NO_ROWS,
                    recorded=judgement.recorded,
                    earlier_counts=recent_counts(judgement.control, judgement.earlier_counts),
                    as_of_ms=_judged_at(judgement.control, judgement.as_of_ms),
                )
                query = rendered(judgement.control, relation, sample_size, engine.dialect)
            except ReflexError as error:
                outcomes[index] = error
                continue
            alike.setdefault(query.counts.sql, []).append((index, relation, query))
        for group in alike.values():
            try:
                counts = counts_of_each(engine, group)
            except SnapshotUnreadableError as error:
                for index, _, _ in group:
                    outcomes[index] = _unreadable(_Recorded(judgements[index].snapshot_id), error)
                continue
            for (index, relation, query), row in zip(group, counts, strict=True):
                judgement = judgements[index]
                target = _Recorded(judgement.snapshot_id)
                try:
                    evaluation = engine.judged(judgement.control, relation, query, row)
                except SnapshotUnreadableError as error:
                    outcomes[index] = _unreadable(target, error)
                    continue
                outcomes[index] = _result(judgement.control, relation, target, evaluation, started)
    return [outcome for outcome in outcomes if outcome is not None]  # each judgement has one


def _unreadable(
    target: Target | _Recorded, error: SnapshotUnreadableError
) -> SnapshotUnreadableError:
    """``error`` naming the snapshot it was met on."""
    return SnapshotUnreadableError(f"cannot evaluate snapshot {target.shown}: {error}")


def counts_of_each(
    engine: Engine, group: Sequence[tuple[int, Relation, RenderedControl]]
) -> list[tuple[Any, ...]]:
    """The counts row of each relation of ``group``, all rendered alike (one query, when there
    are several: the engine must join a ``VALUES`` row laterally, as DuckDB does)."""
    if len(group) == 1:
        _, relation, query = group[0]
        return [engine.counts(relation, query)]
    batch = batched(group[0][2].counts, engine.dialect)
    bound = [query.counts.bind(relation, query.params) for _, relation, query in group]
    rows = engine.fetch(batch.sql(len(group)), batch.bind(bound))
    if [row[0] for row in rows] != list(range(len(group))):
        raise SnapshotUnreadableError("a batch of counts did not return one row a judgement")
    return [row[1:] for row in rows]


_IN_MEMORY: list[duckdb.DuckDBPyConnection] = []
_IN_MEMORY_LOCK = threading.Lock()


@contextmanager
def _in_memory() -> Iterator[DuckDBEngine]:
    """An engine on a cursor of one in-memory database kept for the process: opening a
    database costs ~20-30 ms, a cursor well under one, and a sweep judges thousands of
    datasets. It caches no file's contents (DuckDB's external file cache is off), so a file
    rewritten in place is read anew and a long-running action holds no snapshot's blocks; what
    a run registers lives on its cursor and goes with it."""
    from reflex_actions.engines.duckdb import DuckDBEngine

    with _IN_MEMORY_LOCK:
        if not _IN_MEMORY:
            database = duckdb_connection()
            settings = database.execute(
                "SELECT name FROM duckdb_settings() WHERE name = 'enable_external_file_cache'"
            ).fetchall()
            if settings:  # DuckDB 1.3 and later
                database.execute("SET enable_external_file_cache = false")
            _IN_MEMORY.append(database)
        cursor = _IN_MEMORY[0].cursor()
    engine = DuckDBEngine(cursor)
    try:
        yield engine
    finally:
        cursor.close()


def _judged_at(control: Control, as_of_ms: int | None) -> int | None:
    """The time ``control`` is judged at: ``as_of_ms`` for one judging age (refused when
    none is given), None for the others (whose compiled SQL then never differs by time)."""
    if not control.judged_as_of:
        return None
    if as_of_ms is None:
        raise ControlSpecError(f"{control.describe()} is judged as of a time, and none was given")
    return as_of_ms


def run_control_on_rows(
    control: Control,
    rows: list[dict[str, Any]],
    snapshot_id: str,
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
) -> ControlResult:
    """Evaluate ``control`` on rows built in memory (e.g. a dataset's ownership edges now)."""
    import pyarrow as pa  # only here: it costs a quarter second and 50 MB to import

    started = time.perf_counter()
    columns = control.required_columns()
    table = pa.table(
        {name: pa.array([row.get(name) for row in rows], pa.string()) for name in columns}
    )
    with _in_memory() as engine:
        engine.connection.register("reflex_rows", table)
        relation = Relation.of("SELECT * FROM reflex_rows")
        return _evaluate(engine, control, relation, _Recorded(snapshot_id), sample_size, started)


@dataclass(frozen=True)
class _Recorded:
    """What a judgement reading no target reports as its snapshot."""

    snapshot_id: str

    @property
    def shown(self) -> str:
        return f"<{self.snapshot_id}>"


def _evaluate(
    engine: Engine,
    control: Control,
    relation: Relation,
    target: Target | _Recorded,
    sample_size: int,
    started: float,
) -> ControlResult:
    try:
        evaluation = engine.evaluate(control, relation, sample_size)
    except SnapshotUnreadableError as error:
        raise _unreadable(target, error) from None
    return _result(control, relation, target, evaluation, started)


def _result(
    control: Control,
    relation: Relation,
    target: Target | _Recorded,
    evaluation: Evaluation,
    started: float,
) -> ControlResult:
    allowed = control.allowed_violations(evaluation.rows_scanned)
    return ControlResult(
        earlier_counts=list(relation.earlier_counts) if control.earlier_counts_needed() else None,
        control_type=control.type,
        control=control.describe(),
        snapshot=target.shown,
        snapshot_id=target.snapshot_id,
        passed=evaluation.violation_count <= allowed,
        violation_count=evaluation.violation_count,
        violation_unit=control.violation_unit,
        allowed_violations=allowed,
        rows_scanned=evaluation.rows_scanned,
        sample=[control.sample_row(row) for row in evaluation.sample],
        measures=None if evaluation.measures is None else control.sample_row(evaluation.measures),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )
