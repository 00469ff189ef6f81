"""Evaluate a control on every snapshot of each candidate's history, one DuckDB query each."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import duckdb

from reflex_actions.backtest.history import FailureLabel, History, last_changed_ms
from reflex_actions.backtest.metrics import (
    BacktestReport,
    DatasetBacktest,
    Scores,
    SnapshotOutcome,
)
from reflex_actions.controls import Control
from reflex_actions.errors import SnapshotError, first_line
from reflex_actions.executor import ReferenceSnapshot, recent_counts, with_reference
from reflex_actions.kinds import kind_for_control
from reflex_actions.snapshots import SnapshotFile, files_relation
from reflex_actions.sql import RecordedFacts

DEFAULT_SAMPLE_SIZE = 3
#: DuckDB spills aggregates to disk beyond this, keeping a backtest's memory bounded.
DEFAULT_MEMORY_LIMIT = "768MB"

#: Called with (dataset, fraction done of its query) while a long query runs.
ProgressCallback = Callable[[str, float], None]

#: rows_scanned, violation_count, sample (and, for a control reporting them, its measures)
RawRow = tuple[Any, ...]


def backtest(
    control: Control,
    histories: Sequence[History],
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    progress: ProgressCallback | None = None,
    controls_by_dataset: Mapping[str, Control] | None = None,
    references: Mapping[str, History] | None = None,
) -> BacktestReport:
    """Backtest ``control`` on each history and score it against the histories' labels.

    ``controls_by_dataset`` overrides the control for some datasets (by history dataset name),
    e.g. the same uniqueness check on a dataset that names the key differently. ``references``
    holds the histories of the datasets a referencing control checks against (by dataset urn):
    each child snapshot is paired with the parent's snapshot of the same id, or its latest one
    before it (:meth:`History.snapshot_for`).
    """
    started = time.perf_counter()
    datasets: list[DatasetBacktest] = []
    outcomes: list[SnapshotOutcome] = []
    with tempfile.TemporaryDirectory(prefix="reflex-backtest-") as spill_dir:
        con = duckdb.connect(
            config={
                "memory_limit": memory_limit,
                "temp_directory": spill_dir,
                "preserve_insertion_order": False,
            }
        )
        try:
            for history in histories:
                own_control = (controls_by_dataset or {}).get(history.dataset, control)
                dataset, dataset_outcomes = _backtest_history(
                    con, own_control, history, sample_size, progress, references or {}
                )
                datasets.append(dataset)
                outcomes.extend(dataset_outcomes)
        finally:
            con.close()
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


def _backtest_history(
    con: duckdb.DuckDBPyConnection,
    control: Control,
    history: History,
    sample_size: int,
    progress: ProgressCallback | None,
    references: Mapping[str, History],
) -> tuple[DatasetBacktest, list[SnapshotOutcome]]:
    started = time.perf_counter()
    unusable: dict[str, str] = {}
    types: dict[str, dict[str, str]] = {}  # evaluable snapshot id -> its column types
    for snapshot in history.snapshots:
        try:
            types[snapshot.snapshot_id] = snapshot.check_columns(con, control.required_columns())
        except SnapshotError as error:
            unusable[snapshot.snapshot_id] = str(error)
    evaluable = [snapshot for snapshot in history.snapshots if snapshot.snapshot_id in types]
    target = control.referenced()
    checked_against: dict[str, str] = {}  # child snapshot id -> the parent snapshot it paired
    parent = references.get(target.dataset) if target else None
    if target is not None and parent is None:
        raw = {}
        for snapshot in evaluable:
            unusable[snapshot.snapshot_id] = f"no history of {target.dataset}, which it references"
    elif target is not None or control.one_snapshot_at_a_time or control.earlier_counts_needed():
        raw, checked_against = _evaluate_one_by_one(
            con, control, history, evaluable, types, sample_size, parent, unusable
        )
    else:
        shared = _shared_types(control, [types[s.snapshot_id] for s in evaluable])
        raw = _evaluate(
            con, control, evaluable, shared, sample_size, history.dataset, progress, unusable
        )
    kind = kind_for_control(control.type)
    labels = history.labels_for(kind.pattern if kind else None)
    outcomes = [
        _outcome(
            control,
            history,
            labels,
            snapshot,
            raw.get(snapshot.snapshot_id),
            unusable,
            checked_against.get(snapshot.snapshot_id),
        )
        for snapshot in history.snapshots
    ]
    applicable = any(outcome.evaluable for outcome in outcomes)
    reason = None
    if not history.snapshots:
        reason = f"no snapshots in {history.folder}"
    elif not applicable:
        reason = "no snapshot could be evaluated: " + next(iter(unusable.values()))
    dataset = DatasetBacktest(
        dataset=history.dataset,
        history=str(history.folder),
        applicable=applicable,
        reason=reason,
        labels_without_snapshot=history.labels_without_snapshot(),
        elapsed_ms=_elapsed_ms(started),
        **Scores.compute(outcomes, candidate_assets=1, applicable_assets=int(applicable)),
    )
    return dataset, outcomes


def _shared_types(control: Control, types: list[dict[str, str]]) -> dict[str, str]:
    """The control's columns whose type is the same in every snapshot (a control may then
    compare them in that type, as it does on one snapshot)."""
    shared = {}
    for name in control.required_columns():
        found = {snapshot_types.get(name) for snapshot_types in types}
        if len(found) == 1 and None not in found:
            shared[name] = found.pop()
    return shared


def _evaluate(
    con: duckdb.DuckDBPyConnection,
    control: Control,
    snapshots: list[SnapshotFile],
    types: dict[str, str],
    sample_size: int,
    dataset: str,
    progress: ProgressCallback | None,
    unusable: dict[str, str],
) -> dict[str, RawRow]:
    """Raw results by snapshot id, from one query over all files.

    If that query fails (a file whose footer reads fine but whose data is corrupt), each file is
    evaluated alone so that only the broken ones are marked not evaluable, with DuckDB's reason.
    """
    if not snapshots:
        return {}
    try:
        return _run_partitioned(con, control, snapshots, types, sample_size, dataset, progress)
    except duckdb.Error:
        results: dict[str, RawRow] = {}
        for snapshot in snapshots:
            try:
                results |= _run_partitioned(
                    con, control, [snapshot], types, sample_size, dataset, None
                )
            except duckdb.Error as error:
                unusable[snapshot.snapshot_id] = _cannot_evaluate(snapshot, error)
        return results


def _evaluate_one_by_one(
    con: duckdb.DuckDBPyConnection,
    control: Control,
    history: History,
    snapshots: list[SnapshotFile],
    types: dict[str, dict[str, str]],
    sample_size: int,
    parent: History | None,
    unusable: dict[str, str],
) -> tuple[dict[str, RawRow], dict[str, str]]:
    """Raw results of a control judged one snapshot at a time, in id (time) order, as landing
    runs would have seen them: each against the row counts of the evaluable snapshots before it
    (a control judging volume) and, for a referencing control, against its paired snapshot of
    the ``parent`` history (a child snapshot with none to pair is not evaluable), and as of
    the time it was taken for a control judged as of a time (with the dataset's last update
    replayed from the history: the first of the snapshots since its content last changed);
    and which parent snapshot each was paired with."""
    results: dict[str, RawRow] = {}
    pairs: dict[str, str] = {}
    counts: list[int] = []
    last_updates = last_changed_ms(history) if control.judged_as_of else {}
    for snapshot in snapshots:
        as_of = history.as_of_ms(snapshot.snapshot_id) if control.judged_as_of else None
        if control.judged_as_of and as_of is None:
            unusable[snapshot.snapshot_id] = (
                f"snapshot id {snapshot.snapshot_id!r} is not a time and labels.yaml gives no "
                "snapshot_times entry for it: it cannot be judged as of when it was taken"
            )
            continue
        paired = None
        if parent is not None:
            paired = parent.snapshot_for(snapshot.snapshot_id)
            if paired is None:
                unusable[snapshot.snapshot_id] = (
                    f"no snapshot of {parent.dataset} at or before {snapshot.snapshot_id}"
                )
                continue
            pairs[snapshot.snapshot_id] = f"{parent.dataset} {paired[0].snapshot_id} ({paired[1]})"
        try:
            relation = replace(
                with_reference(
                    con,
                    control,
                    snapshot.relation(types=types[snapshot.snapshot_id]),
                    ReferenceSnapshot(*paired) if paired else None,
                ),
                earlier_counts=recent_counts(control, counts),
                as_of_ms=as_of,
                recorded=RecordedFacts(last_updated_ms=last_updates.get(snapshot.snapshot_id))
                if control.judged_as_of and not control.reads_data()
                else None,
            )
            query = control.compile(relation, sample_size)
            raw = con.execute(query.sql, query.params).fetchone()
        except SnapshotError as error:
            unusable[snapshot.snapshot_id] = str(error)
            continue
        except duckdb.Error as error:
            unusable[snapshot.snapshot_id] = _cannot_evaluate(snapshot, error)
            continue
        results[snapshot.snapshot_id] = raw
        counts.append(raw[0])
    return results, pairs


def _run_partitioned(
    con: duckdb.DuckDBPyConnection,
    control: Control,
    snapshots: list[SnapshotFile],
    types: dict[str, str],
    sample_size: int,
    dataset: str,
    progress: ProgressCallback | None,
) -> dict[str, RawRow]:
    relation = replace(files_relation(snapshots, control.required_columns()), types=types)
    query = control.compile(relation, sample_size)
    rows = _execute(con, query.sql, query.params, dataset, progress)
    by_path = {row[0]: tuple(row[1:]) for row in rows}
    results = {s.snapshot_id: by_path[s.read_path] for s in snapshots if s.read_path in by_path}
    # A file with no rows yields no group; whether an empty table is a failure is the control's
    # to say (a row count says yes), so it is evaluated alone, as a landing run would.
    for snapshot in snapshots:
        if snapshot.read_path not in by_path:
            alone = control.compile(snapshot.relation(types=types), sample_size)
            results[snapshot.snapshot_id] = con.execute(alone.sql, alone.params).fetchone()
    return results


def _execute(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: dict[str, Any],
    dataset: str,
    progress: ProgressCallback | None,
) -> list[tuple[Any, ...]]:
    """Run a query; with a progress callback, report DuckDB's query progress while it runs."""
    if progress is None:
        return con.execute(sql, params).fetchall()
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["rows"] = con.execute(sql, params).fetchall()
        except duckdb.Error as error:
            result["error"] = error

    worker = threading.Thread(target=run, name="reflex-backtest-query")
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
        fraction = con.query_progress()
        if fraction >= 0:
            progress(dataset, fraction / 100)
    progress(dataset, 1.0)
    if "error" in result:
        raise result["error"]
    return result["rows"]


def _outcome(
    control: Control,
    history: History,
    labels: Mapping[str, FailureLabel],
    snapshot: SnapshotFile,
    raw: RawRow | None,
    unusable: dict[str, str],
    checked_against: str | None,
) -> SnapshotOutcome:
    label = labels.get(snapshot.snapshot_id)
    common = {
        "checked_against": checked_against,
        "dataset": history.dataset,
        "snapshot_id": snapshot.snapshot_id,
        "path": str(snapshot.path),
        "labelled_failure": label is not None,
        "incident": label.incident if label else None,
    }
    if raw is None:
        reason = unusable.get(snapshot.snapshot_id, "not evaluated")
        return SnapshotOutcome(**common, evaluable=False, reason=reason, verdict="not_evaluable")
    rows_scanned, violation_count, sample, *measures = raw
    flagged = violation_count > control.allowed_violations(rows_scanned)
    return SnapshotOutcome(
        **common,
        evaluable=True,
        flagged=flagged,
        violation_count=violation_count,
        rows_scanned=rows_scanned,
        sample=[control.sample_row(row) for row in sample or []],
        measures=control.sample_row(measures[0]) if measures else None,
        verdict=SnapshotOutcome.verdict_for(flagged, label is not None),
    )


def _cannot_evaluate(snapshot: SnapshotFile, error: duckdb.Error) -> str:
    """Why a snapshot is not evaluable when DuckDB fails on it (its first line only)."""
    return f"cannot evaluate snapshot {snapshot.path}: {first_line(error)}"


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
