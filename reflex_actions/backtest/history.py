"""A dataset's history: one snapshot file per run, and ``labels.yaml`` naming known failures.

Layout (DESIGN.md §5)::

    history/
      2026-09-01.parquet        # snapshot id = file name without extension
      2026-09-02.csv
      labels.yaml               # failures: [2026-09-02, {snapshot: .., incident: urn:..}]
                                # snapshot_times: {run-17: 2026-09-14T06:00Z} (optional)

Snapshots not named in ``labels.yaml`` count as normal; a history without ``labels.yaml`` has no
labelled failures. A label may name the lesson kind of its failure (``kind: missing_values``):
for the controls of another kind that snapshot counts as normal.

A history need not be a folder (DESIGN §8): the partitions of a table (one point per value of
its partition column), the snapshots of an Iceberg table or the versions of a Delta table are
history points too, each a target an engine reads, labelled by a ``labels.yaml``-format file
whose ids are the partition values, snapshot ids or versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reflex_actions.bounded import BoundedYamlError, excerpt, load_bounded_yaml
from reflex_actions.engines.base import (
    DeltaTarget,
    FileTarget,
    IcebergTarget,
    TableTarget,
    Target,
)
from reflex_actions.errors import ReflexError, SnapshotError
from reflex_actions.snapshots import (
    FILE_COLUMN,
    FORMATS_BY_SUFFIX,
    SnapshotFile,
    duckdb_connection,
    files_relation,
)
from reflex_actions.sql import SNAPSHOT, column, exp, quote_identifier, render
from reflex_actions.times import TimeFormatError, parse_instant

# DuckDB is imported where a query runs: defining the kinds and controls (all that
# `control compile` needs) starts no engine.
if TYPE_CHECKING:
    import duckdb

    from reflex_actions.engines.base import Engine

LABELS_FILE = "labels.yaml"
#: Longest labels file read (characters): a failure label takes a line, so years of them fit.
MAX_LABELS_CHARS = 4 * 1024 * 1024
#: Most points a table's history may have (partitions, snapshots, versions): a partition
#: column with more distinct values is no history but a key.
MAX_HISTORY_POINTS = 100_000


class HistoryError(ReflexError):
    """A history folder or its labels file that cannot be used."""


class FailureLabel(BaseModel):
    """A snapshot known to hold a failure, optionally with the incident that found it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    snapshot: str = Field(min_length=1)
    incident: str | None = None
    #: the lesson kind (pattern id) of the failure, when known: another kind's failure is a
    #: normal snapshot for this kind's controls (a NULL day is no orphan day)
    kind: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("snapshot", mode="before")
    @classmethod
    def _snapshot_as_text(cls, value: object) -> object:
        # YAML reads an unquoted 2026-09-04 as a date; snapshot ids are file names, i.e. text.
        return str(value) if isinstance(value, date | int) else value


class Labels(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    failures: list[FailureLabel] = Field(default_factory=list)
    #: when each snapshot was taken (ISO 8601, no zone = UTC), for ids that are not times
    snapshot_times: dict[str, str] = Field(default_factory=dict)

    @field_validator("snapshot_times", mode="before")
    @classmethod
    def _times_as_text(cls, value: object) -> object:
        # YAML reads unquoted ids and times as dates and datetimes; both are text here.
        if value is None:
            return {}
        if isinstance(value, dict):
            return {
                str(key) if isinstance(key, date | int) else key: (
                    item.isoformat() if isinstance(item, date) else item
                )
                for key, item in value.items()
            }
        return value

    @field_validator("failures", mode="before")
    @classmethod
    def _plain_ids_are_labels(cls, value: object) -> object:
        if value is None:
            return []
        if isinstance(value, list):
            return [item if isinstance(item, dict) else {"snapshot": item} for item in value]
        return value


@dataclass(frozen=True)
class HistoryPoint:
    """One point of a history: the target an engine reads (a snapshot file, a partition, an
    Iceberg snapshot, a Delta version) and the id its label and outcome name it by."""

    snapshot_id: str
    target: Target


@dataclass(frozen=True)
class History:
    """The snapshots of one dataset in history order, with their failure labels: a folder's
    snapshot files in snapshot-id order, or a table's points (``table`` says which table)."""

    dataset: str
    #: the history folder; None for a table's history
    folder: Path | None
    #: the snapshot files of a folder history (a table's history has none)
    snapshots: tuple[SnapshotFile, ...]
    labels: dict[str, FailureLabel]
    #: snapshot id -> when it was taken (epoch ms), from ``labels.yaml`` ``snapshot_times``
    #: (and, for a lakehouse table, each snapshot's or version's commit time)
    snapshot_times: Mapping[str, int] = field(default_factory=dict)
    #: the table a table's history reads, as shown to people (None for a folder)
    table: str | None = None
    #: a table history's points in history order (partition order, commit order)
    table_points: tuple[HistoryPoint, ...] = ()
    #: why a table's points could not be listed (its engine unreachable, the table missing):
    #: the history then has none, and its backtest says why it judged nothing
    unreadable: str | None = None
    #: the table (or file) a partition history's points are partitions of: a child's point is
    #: paired with its partition of the same value (:meth:`reference_for`)
    partitioned: FileTarget | TableTarget | None = None

    @property
    def points(self) -> tuple[HistoryPoint, ...]:
        """Every point of the history, in history order: a folder's are its snapshot files."""
        if self.table is not None:
            return self.table_points
        return tuple(HistoryPoint(s.snapshot_id, FileTarget(s.path)) for s in self.snapshots)

    @property
    def shown(self) -> str:
        """Where the history is read from: its folder or its table."""
        return self.table if self.table is not None else str(self.folder)

    def as_of_ms(self, snapshot_id: str) -> int | None:
        """When a snapshot was taken: its ``snapshot_times`` entry, else its id read as a time
        (a date alone is the end of that day: a daily snapshot holds the day's data); None
        when neither tells."""
        if snapshot_id in self.snapshot_times:
            return self.snapshot_times[snapshot_id]
        try:
            return parse_instant(snapshot_id, date_is_end_of_day=True)
        except TimeFormatError:
            return None

    def snapshots_with(
        self, con: duckdb.DuckDBPyConnection, columns: list[str]
    ) -> list[SnapshotFile]:
        """The snapshots that can be read and have these columns: drifted or unreadable ones say
        nothing about them (evidence gathering skips them)."""
        usable = []
        for snapshot in self.snapshots:
            try:
                snapshot.check_columns(con, columns)
            except SnapshotError:
                continue
            usable.append(snapshot)
        return usable

    def snapshot_for(self, snapshot_id: str) -> tuple[SnapshotFile, str] | None:
        """The snapshot to pair with another dataset's ``snapshot_id`` (a parent's for a
        child's), and how it was chosen: the one with the same id, else the latest at or before
        it in snapshot-id order; None when every snapshot is later."""
        earlier = None
        for snapshot in self.snapshots:
            if snapshot.snapshot_id == snapshot_id:
                return snapshot, "the same snapshot id"
            if snapshot.snapshot_id < snapshot_id:
                earlier = snapshot
        if earlier is None:
            return None
        return earlier, f"the latest at or before {snapshot_id}"

    def reference_for(self, snapshot_id: str) -> tuple[HistoryPoint, str] | None:
        """The point of this (parent) history to check a child's point ``snapshot_id``
        against, and how it was chosen. A partition history gives its partition of the same
        value, listed or not, as landing checks a landed partition (a value the parent lacks is
        an empty partition, where every child value is an orphan); a folder its snapshot file
        by :meth:`snapshot_for`. None when there is no such point (another table's history
        has no snapshot files)."""
        if self.partitioned is not None:
            partition = replace(self.partitioned, partition=snapshot_id)
            return HistoryPoint(snapshot_id, partition), "the same partition"
        paired = self.snapshot_for(snapshot_id)
        if paired is None:
            return None
        snapshot, chosen = paired
        return HistoryPoint(snapshot.snapshot_id, FileTarget(snapshot.path)), chosen

    def labels_for(self, pattern: str | None) -> dict[str, FailureLabel]:
        """The labels that count as failures for a control of this kind: those of the kind
        and those naming no kind."""
        return {
            snapshot: label
            for snapshot, label in self.labels.items()
            if label.kind is None or label.kind == pattern
        }

    def for_kind(self, pattern: str) -> History:
        """This history as a kind's evidence reads it: another kind's failures are normal
        snapshots for it (a NULL day is no orphan day), as its backtest counts them."""
        return replace(self, labels=self.labels_for(pattern))

    def with_failures(self, snapshot_ids: list[str], incident: str) -> History:
        """This history with these snapshots also labelled failures of ``incident`` (e.g. the
        ones an incident's dates point at, which ``labels.yaml`` does not name)."""
        added = {sid: FailureLabel(snapshot=sid, incident=incident) for sid in snapshot_ids}
        return replace(self, labels={**added, **self.labels})

    def labels_without_snapshot(self) -> list[str]:
        """Labelled snapshot ids with no point in the history (e.g. rotated out of retention)."""
        present = {point.snapshot_id for point in self.points}
        return sorted(set(self.labels) - present)


def _read_labels(path: Path) -> Labels:
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_LABELS_CHARS + 1)
        data = load_bounded_yaml(text, LABELS_FILE, MAX_LABELS_CHARS, max_depth=8)
    except (OSError, UnicodeDecodeError, BoundedYamlError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise HistoryError(f"cannot read {path}: {reason}") from None
    try:
        labels = Labels.model_validate(data if data is not None else {})
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or 'labels'}: {item['msg']}"
            for item in error.errors()
        )
        raise HistoryError(f"invalid {path}: {problems}") from None
    _check_kinds(labels, path)
    return labels


def _check_kinds(labels: Labels, path: Path) -> None:
    """Every kind a label names is a registered kind's pattern: a label of a kind no control
    has would silently count as a normal snapshot for all of them (its failure never scored)."""
    named = {label.kind for label in labels.failures if label.kind is not None}
    if not named:
        return  # loading every kind costs a fresh process ~0.2 s: only when a label names one
    from reflex_actions.registry import registered_kinds

    known = [kind.pattern for kind in registered_kinds()]
    unknown = sorted(named - set(known))
    if unknown:
        raise HistoryError(
            f"invalid {path}: no lesson kind {excerpt(unknown[0])}; a label's kind is one of "
            f"{', '.join(known)}"
        )


def load_history(folder: str | Path, dataset: str | None = None) -> History:
    """Load a history folder; the dataset name defaults to the folder name."""
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise HistoryError(f"{root} is a file, not a history folder")
    if not root.is_dir():
        raise HistoryError(f"history folder not found: {root}")
    files = sorted(
        (path for path in root.iterdir() if path.suffix.lower() in FORMATS_BY_SUFFIX),
        key=lambda path: path.stem,
    )
    snapshots = tuple(SnapshotFile.from_path(path) for path in files if path.is_file())
    seen: dict[str, Path] = {}
    for snapshot in snapshots:
        if snapshot.snapshot_id in seen:
            raise HistoryError(
                f"snapshot id {snapshot.snapshot_id!r} is ambiguous in {root}: "
                f"{seen[snapshot.snapshot_id].name} and {snapshot.path.name}"
            )
        seen[snapshot.snapshot_id] = snapshot.path
    labels_path = root / LABELS_FILE
    labels, times = read_labels(labels_path if labels_path.exists() else None)
    return History(
        dataset=dataset or root.name,
        folder=root,
        snapshots=snapshots,
        labels=labels,
        snapshot_times=times,
    )


def read_labels(path: Path | None) -> tuple[dict[str, FailureLabel], dict[str, int]]:
    """A ``labels.yaml``-format file's failure labels by snapshot id, and its snapshot times
    (none of either without a file)."""
    if path is None:
        return {}, {}
    labels = _read_labels(path)
    return {label.snapshot: label for label in labels.failures}, _snapshot_times(labels, path)


def partition_history(
    engine: Engine,
    target: FileTarget | TableTarget,
    partition_column: str,
    *,
    dataset: str | None = None,
    labels: Path | None = None,
) -> History:
    """A table's history with one point per value of ``partition_column`` (rows whose value is
    NULL belong to none), in the column's order, listed through ``engine``; the dataset name
    defaults to the table's name (a file's stem)."""
    points = [
        HistoryPoint(value, replace(target, partition_column=partition_column, partition=value))
        for value in partition_values(engine, target, partition_column)
    ]
    default = target.name if isinstance(target, TableTarget) else target.path.stem
    shown = f"{target.shown} partitioned by {partition_column}"
    history = _table_history(dataset or default, shown, points, {}, labels)
    return replace(history, partitioned=replace(target, partition_column=partition_column))


def partition_values(
    engine: Engine, target: FileTarget | TableTarget, partition_column: str
) -> list[str]:
    """The distinct non-NULL values of the column, ordered, each as text (what a partition
    target binds and a label names)."""
    relation = engine.relation(target, [partition_column])
    query = (
        exp.select(column(partition_column))
        .distinct()
        .from_(SNAPSHOT)
        .where(exp.Not(this=exp.Is(this=column(partition_column), expression=exp.Null())))
        .order_by(column(partition_column))
        .limit(MAX_HISTORY_POINTS + 1)
    )
    rows = engine.fetch(*render(query, relation, engine.dialect))
    return [str(value) for (value,) in rows]


def unreadable_history(dataset: str, shown: str, reason: str) -> History:
    """The history of a table whose points cannot be listed: none, and ``reason`` why (its
    dataset is then not evaluable, beside the others a backtest judges)."""
    return History(
        dataset=dataset, folder=None, snapshots=(), labels={}, table=shown, unreadable=reason
    )


def iceberg_history(
    catalog: str, table: str, *, dataset: str | None = None, labels: Path | None = None
) -> History:
    """An Iceberg table's history: one point per snapshot, oldest first, each judged as of its
    commit time; the dataset name defaults to the table's name."""
    from reflex_actions.engines.lakehouse import ICEBERG_TABLES, iceberg_points

    committed = iceberg_points(ICEBERG_TABLES.table(catalog, table))
    points = [HistoryPoint(str(p.point), IcebergTarget(catalog, table, p.point)) for p in committed]
    times = {str(p.point): p.committed_ms for p in committed if p.committed_ms is not None}
    return _table_history(
        dataset or table, IcebergTarget(catalog, table).shown, points, times, labels
    )


def delta_history(path: str, *, dataset: str | None = None, labels: Path | None = None) -> History:
    """A Delta table's history: one point per version in its log, oldest first, each judged as
    of its commit time; the dataset name defaults to the table folder's name."""
    from reflex_actions.engines.lakehouse import delta_points

    committed = delta_points(path)
    points = [HistoryPoint(str(p.point), DeltaTarget(path, p.point)) for p in committed]
    times = {str(p.point): p.committed_ms for p in committed if p.committed_ms is not None}
    return _table_history(
        dataset or Path(path).name, DeltaTarget(path).shown, points, times, labels
    )


def _table_history(
    dataset: str,
    shown: str,
    points: list[HistoryPoint],
    committed: dict[str, int],
    labels_path: Path | None,
) -> History:
    if len(points) > MAX_HISTORY_POINTS:
        raise HistoryError(
            f"{shown[:200]} has more than {MAX_HISTORY_POINTS} history points: "
            "not a history to backtest on"
        )
    labels, times = read_labels(labels_path)
    return History(
        dataset=dataset,
        folder=None,
        snapshots=(),
        labels=labels,
        snapshot_times={**committed, **times},  # a labels file's time overrides the commit's
        table=shown,
        table_points=tuple(points),
    )


def _snapshot_times(labels: Labels, path: Path) -> dict[str, int]:
    times = {}
    for snapshot_id, text in labels.snapshot_times.items():
        try:
            times[snapshot_id] = parse_instant(text)
        except TimeFormatError as error:
            raise HistoryError(
                f"invalid {path}: snapshot_times.{excerpt(snapshot_id)}: {error}"
            ) from None
    return times


#: The share of a history's normal snapshots, earliest first, that a kind may learn from.
LEARNING_SHARE = (2, 3)


class LearningSplit(BaseModel):
    """Which snapshots of a source's history a kind learned its parameters from, and which it
    held out so that a backtest on them is not flattered by what was learned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the history's dataset name, as backtest outcomes name it
    dataset: str
    #: the earlier normal snapshots the parameters were learned from
    normal: list[str]
    #: the incident's own failure snapshots, read to find what broke
    failures: list[str]
    #: every other snapshot of the history when the parameters were learned
    held_out: list[str]
    #: why nothing could be held out, when nothing was
    note: str | None = None

    @property
    def learned(self) -> list[str]:
        """Every snapshot the parameters saw (in-sample), in snapshot-id order."""
        return sorted({*self.normal, *self.failures})


def split_for_learning(
    history: History, failures: Collection[str], readable: Collection[str] | None = None
) -> LearningSplit:
    """Split ``history`` in snapshot-id (time) order for a kind that learns parameters from it.

    The rule: of the normal (unlabelled) snapshots that can be read (``readable``; all when not
    given), the earliest two thirds, rounded up, are learned from and the later ones are held
    out. The incident's own failure snapshots (``failures``) are read to find what broke, so
    they are in-sample wherever they lie. Everything else — the later normal snapshots, other
    incidents' failures, unreadable snapshots — is held out. With fewer than three normal
    snapshots rounding up holds none out, and ``note`` says so.
    """
    ids = [point.snapshot_id for point in history.points]
    kept = set(ids if readable is None else readable)
    usable = [sid for sid in ids if sid in kept]
    normal = [sid for sid in usable if sid not in history.labels]
    share, whole = LEARNING_SHARE
    learning = normal[: -(-len(normal) * share // whole)]  # rounded up
    failed = [sid for sid in usable if sid in failures]
    learned = {*learning, *failed}
    held_out = [sid for sid in ids if sid not in learned]
    note = None
    if len(learning) == len(normal):
        note = (
            f"only {len(normal)} normal snapshot(s): all were learned from, none could be held out"
        )
    return LearningSplit(
        dataset=history.dataset, normal=learning, failures=failed, held_out=held_out, note=note
    )


def row_counts(history: History) -> dict[str, int]:
    """Each snapshot's row count, in one DuckDB query (unreadable snapshots left out)."""
    import duckdb

    con = duckdb_connection()
    try:
        usable = history.snapshots_with(con, [])
        if not usable:
            return {}
        relation = files_relation(usable, [])
        file = quote_identifier(FILE_COLUMN)
        rows = con.execute(
            f"WITH snapshot AS ({relation.sql}) SELECT {file}, count(*) FROM snapshot GROUP BY 1",
            relation.params,
        ).fetchall()
    except duckdb.Error:
        return {}
    finally:
        con.close()
    by_path = dict(rows)
    # an empty file yields no group: it holds 0 rows
    return {s.snapshot_id: int(by_path.get(s.read_path, 0)) for s in usable}


def last_changed_ms(history: History) -> dict[str, int]:
    """Each timed point's last update, replayed from the history as DataHub's operation
    timeline would record it: the time of the first point since the content last changed
    (byte-identical files are one state; an unreadable file is a change; every lakehouse
    commit and every partition's load is an update)."""
    updates: dict[str, int] = {}
    previous: tuple[str | None, int] | None = None
    for point in history.points:
        as_of = history.as_of_ms(point.snapshot_id)
        if as_of is None:
            continue
        state = _state(point)
        if previous is None or state is None or state != previous[0]:
            previous = (state, as_of)
        updates[point.snapshot_id] = previous[1]
    return updates


def _state(point: HistoryPoint) -> str | None:
    """What identifies the point's content: a whole file's digest (None when unreadable), or
    the point itself for a commit or a partition."""
    target = point.target
    if not isinstance(target, FileTarget) or target.partition_column is not None:
        return f"point {point.snapshot_id}"
    try:
        with target.path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None
