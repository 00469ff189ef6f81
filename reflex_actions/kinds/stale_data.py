"""Stale data: a loader silently stopped and the table kept its old rows (``freshness``).

The control judges a table's age as of a time: with ``timestamp_field``, the newest value of
that column in the snapshot; without it, the dataset's last update as DataHub records it
(``operation.lastUpdatedTimestamp``), so it needs no data at all. A stale table sends no event,
so its controls run on a schedule, as of the tick. A violation is 1
when the table is older than ``max_age`` (or holds no timestamp at all), else 0; the age and
the bound are in the result's measures, pass or fail.

Times: a column of type TIMESTAMP (or a text value without a zone) is UTC; a DATE is its
midnight. A time more than ``future_tolerance`` after the as-of time (an open end such as
``9999-12-31``) is no load: it is ignored and counted, and a table of such times only is stale.
In a backtest each snapshot is judged as of when it was taken: its ``snapshot_times`` entry in
``labels.yaml``, else its id read as a time (a date alone is the end of that day).

Words: stale or outdated data, a loader or pipeline that stopped, no new rows since, not
refreshed. Evidence: each timestamp column's lag (as-of time minus newest value) in the
incident's snapshots against the normal lags; ``max_age`` is the largest normal lag of the
earlier snapshots (no peeking), but no less than the time between snapshots (a table is that
old just before its next load), with headroom, and must stay below the incident's lag.
"""

from __future__ import annotations

import math
import re
import statistics
from itertools import pairwise
from typing import Any, ClassVar, Literal

from pydantic import ValidationInfo, field_validator

from reflex_actions.backtest.history import History, split_for_learning
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import Control
from reflex_actions.controls.base import validate_column_name
from reflex_actions.errors import SnapshotError, SnapshotNotFoundError, SnapshotUnreadableError
from reflex_actions.kinds.base import LearnedFinding, LessonKind, StatusOf, Trigger, learned_draft
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.fields import FieldMatch, type_family
from reflex_actions.similarity.lineage import Relation as LineageRelation
from reflex_actions.similarity.models import Excluded, Signal, SimilarityQuery
from reflex_actions.similarity.schema_signals import schema_signals, source_fields
from reflex_actions.sql import SNAPSHOT, ControlQuery, Relation, column, count_where, exp, param
from reflex_actions.times import (
    MAX_DURATION_SECONDS,
    TimeFormatError,
    format_duration,
    iso,
    parse_duration,
)
from reflex_actions.vocabulary import display_name

STALE_DATA = "stale_data"
#: The share a learned ``max_age`` leaves above the largest normal lag.
HEADROOM = 0.25
#: DuckDB types read natively as a time (any other type of ``timestamp_field`` is refused).
_TIMESTAMP_TYPES = re.compile(r"^(TIMESTAMP(_S|_MS|_NS)?|DATETIME|DATE)$")
_ZONED_TYPES = ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ")
_TEXT_TYPES = ("VARCHAR", "TEXT", "STRING")
#: A time written as text in ISO 8601 form, without and with a zone (no backslashes: some
#: dialects read them as escapes in string literals).
_PLAIN_TEXT = "^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+)?)?)?$"
_ZONED_TEXT = _PLAIN_TEXT[:-1] + "(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"


def _type(name: str) -> exp.DataType:
    return exp.DataType.build(name)


def _since_epoch(time: exp.Expression, zoned: bool) -> exp.Expression:
    """Milliseconds from the epoch to ``time``: a zoned time from the zoned epoch (an instant
    whatever the session's zone), a plain one from the plain epoch (a time without a zone is
    UTC)."""
    epoch = "1970-01-01 00:00:00+00" if zoned else "1970-01-01 00:00:00"
    start = exp.cast(exp.Literal.string(epoch), "TIMESTAMPTZ" if zoned else "TIMESTAMP")
    return exp.DateDiff(this=time, expression=start, unit=exp.var("MILLISECOND"))


class FreshnessControl(Control):
    """The table is at most ``max_age`` old as of the time it is judged: by the newest value of
    ``timestamp_field``, or by the last update DataHub records when no field is given. A time
    more than ``future_tolerance`` after the time judged (an open end such as ``9999-12-31``,
    a clock far ahead) is not a load: it is ignored, and counted."""

    type: Literal["freshness"] = "freshness"
    max_age: str
    timestamp_field: str | None = None
    future_tolerance: str = "1h"

    violation_unit: ClassVar[str] = "stale tables"
    #: the judgement a run reports, pass or fail, in the order the counts row carries it
    _measures: ClassVar[tuple[str, ...]] = (
        "newest_ms", "as_of_ms", "age_seconds", "max_age_seconds", "future_values_ignored",
    )  # fmt: skip
    judged_as_of: ClassVar[bool] = True

    @field_validator("max_age", "future_tolerance", mode="before")
    @classmethod
    def _a_duration(cls, value: object, info: ValidationInfo) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{info.field_name} is a duration with a unit, e.g. 90m, 26h or 2d")
        try:
            parse_duration(value)
        except TimeFormatError as error:
            raise ValueError(str(error)) from None
        return value.strip().lower()

    @field_validator("timestamp_field")
    @classmethod
    def _check_field(cls, value: str | None) -> str | None:
        return None if value is None else validate_column_name(value)

    @property
    def max_age_seconds(self) -> int:
        return parse_duration(self.max_age)

    @property
    def future_tolerance_seconds(self) -> int:
        return parse_duration(self.future_tolerance)

    def required_columns(self) -> list[str]:
        return [self.timestamp_field] if self.timestamp_field else []

    def reads_data(self) -> bool:
        return self.timestamp_field is not None

    def judged_on_recorded(self) -> frozenset[str]:
        return frozenset() if self.timestamp_field else frozenset({"last_updated_ms"})

    def with_dataset_fields(self, mapping: dict[str, str]) -> FreshnessControl:
        if self.timestamp_field is None or self.timestamp_field not in mapping:
            return self
        return self.model_copy(update={"timestamp_field": mapping[self.timestamp_field]})

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """The newest time (epoch ms) not after the relation's time plus ``future_tolerance``,
        the times after it (ignored), and the age as of the relation's time, in the counts row
        (its measures, pass or fail); stale when older than ``max_age`` or when there is no
        such time at all. The time and the last update are bound at run time (the executor
        refuses a run without them)."""
        params: dict[str, Any] = {
            "max_age_seconds": self.max_age_seconds,
            "future_tolerance_seconds": self.future_tolerance_seconds,
            **self.bound_from(relation),
        }
        as_of = exp.cast(param("as_of_ms"), "BIGINT")
        latest = as_of.copy() + exp.cast(param("future_tolerance_seconds"), "BIGINT") * 1000
        if self.timestamp_field is None:
            self._recorded_last_update(relation)  # refused when DataHub records none
            time: exp.Expression = exp.cast(param("last_updated_ms"), "BIGINT")
            newest = exp.Case().when(time <= latest, time.copy())
            ignored = exp.Case().when(time.copy() > latest.copy(), "1").else_("0")
            source: exp.Expression = exp.to_table(SNAPSHOT)
        else:
            time = exp.column("time_ms")
            newest = exp.func("max", exp.Case().when(time <= latest, time.copy()))
            ignored = count_where(time.copy() > latest.copy())
            timed = exp.select(self._epoch_ms(relation).as_("time_ms")).from_(SNAPSHOT)
            source = timed.subquery("timed")
        measured = exp.select(
            exp.cast(exp.func("count", exp.Star()), "BIGINT").as_("rows_scanned"),
            newest.as_("newest_ms"),
            as_of.as_("as_of_ms"),
            exp.cast(param("max_age_seconds"), "BIGINT").as_("max_age_seconds"),
            exp.cast(ignored, "BIGINT").as_("future_values_ignored"),
        ).from_(source)
        newest_ms, as_of_ms, age = (
            exp.column(name) for name in ("newest_ms", "as_of_ms", "age_seconds")
        )
        judged = exp.select(
            "*", ((as_of_ms - newest_ms) / exp.Literal.number("1000.0")).as_("age_seconds")
        ).from_(measured.subquery("measured"))
        stale = exp.or_(newest_ms.is_(exp.null()), age > exp.column("max_age_seconds"))
        counts = exp.select(
            "rows_scanned",
            exp.Case().when(stale, "1").else_("0").as_("violation_count"),
            *self._measures,
        ).from_(judged.subquery("judged"))
        return ControlQuery(counts=counts, params=params, sample_is_measures=True)

    def bound_from(self, relation: Relation) -> dict[str, Any]:
        """The time it is judged as of, and (without ``timestamp_field``) the last update
        DataHub records."""
        bound: dict[str, Any] = {"as_of_ms": relation.as_of_ms}
        if self.timestamp_field is None:
            recorded = relation.recorded
            bound["last_updated_ms"] = recorded.last_updated_ms if recorded else None
        return bound

    def _recorded_last_update(self, relation: Relation) -> int | None:
        """The last update DataHub records (bound at run time where the query is shown)."""
        if relation.recorded is None:
            return None
        if relation.recorded.last_updated_ms is None:
            raise SnapshotNotFoundError(
                "DataHub records no update of this dataset (no operation aspect)"
            )
        return relation.recorded.last_updated_ms

    def _epoch_ms(self, relation: Relation) -> exp.Expression:
        """The field as epoch ms, by its type: natively for a date or timestamp; text (a CSV
        reads every column as text) in ISO 8601 form by whether it names a zone, a time
        without one being UTC; text in no such form is no time (NULL, never an error, in a
        dialect whose cast cannot fail softly); anything else is refused, naming its type."""
        assert self.timestamp_field is not None
        value = column(self.timestamp_field)
        found = relation.types.get(self.timestamp_field)
        if found in _ZONED_TYPES:
            return _since_epoch(value, zoned=True)
        if found is not None and _TIMESTAMP_TYPES.match(found):
            return _since_epoch(exp.cast(value, "TIMESTAMP"), zoned=False)
        if found is None or relation.text_only or found in _TEXT_TYPES:
            text = exp.Trim(this=exp.cast(value, "VARCHAR"))
            return (
                exp.Case()
                .when(
                    exp.RegexpLike(this=text, expression=exp.Literal.string(_ZONED_TEXT)),
                    _since_epoch(exp.TryCast(this=text.copy(), to=_type("TIMESTAMPTZ")), True),
                )
                .when(
                    exp.RegexpLike(this=text.copy(), expression=exp.Literal.string(_PLAIN_TEXT)),
                    _since_epoch(exp.TryCast(this=text.copy(), to=_type("TIMESTAMP")), False),
                )
            )
        raise SnapshotUnreadableError(
            f"timestamp_field {self.timestamp_field!r} is {found}, not a date or a timestamp"
        )

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        newest_ms, as_of_ms, age_seconds, max_age_seconds, future_values_ignored = row
        return {
            "newest": iso(newest_ms),
            "as_of": iso(as_of_ms),
            "age_seconds": None if age_seconds is None else round(float(age_seconds), 3),
            "max_age_seconds": max_age_seconds,
            "age": None if age_seconds is None else format_duration(float(age_seconds)),
            "future_values_ignored": int(future_values_ignored),
        }

    def describe(self) -> str:
        what = self.timestamp_field or "the dataset's last recorded update"
        return f"{what} is at most {self.max_age} old"


# --- evidence from the history -------------------------------------------------------------------
#: A bound on any lag judged (a lag beyond it is "no time at all").
_NO_BOUND = f"{MAX_DURATION_SECONDS // 86400}d"


def snapshot_lags(history: History, field: str, snapshot_ids: list[str]) -> dict[str, float | None]:
    """Each snapshot's lag in seconds (its as-of time minus the newest ``field`` value; None
    when it holds no readable time), measured by the control itself, so a time beyond its
    ``future_tolerance`` is none; a time ahead within it is no lag (0), never a negative one.
    Snapshots without an as-of time, or that cannot be read, are left out."""
    import duckdb  # here, not at module level: loading the kinds starts no engine

    from reflex_actions.executor import run_control  # the engine, only when measuring

    control = FreshnessControl(max_age=_NO_BOUND, timestamp_field=field)
    wanted = set(snapshot_ids)
    lags: dict[str, float | None] = {}
    with duckdb.connect() as con:
        for snapshot in history.snapshots:
            as_of = history.as_of_ms(snapshot.snapshot_id)
            if snapshot.snapshot_id not in wanted or as_of is None:
                continue
            try:
                result = run_control(control, snapshot.path, connection=con, as_of_ms=as_of)
            except SnapshotError:
                continue
            lag = (result.measures or {}).get("age_seconds")
            lags[snapshot.snapshot_id] = None if lag is None else max(0.0, lag)
    return lags


def _timestamp_columns(history: History) -> list[str]:
    """The columns of the latest readable snapshot that may hold times: dates and timestamps,
    or (a CSV reads as text) every text column; the lags then tell which hold times."""
    import duckdb

    with duckdb.connect() as con:
        for snapshot in reversed(history.snapshots):
            try:
                snapshot.check_columns(con, [])  # exists, readable, reads only itself
                described = snapshot.column_types(con)
            except SnapshotError:
                continue
            return [
                name
                for name, type_ in described.items()
                if type_ in _ZONED_TYPES or _TIMESTAMP_TYPES.match(type_) or type_ in _TEXT_TYPES
            ]
    return []


def _learned_max_age(largest_normal_lag: float, cadence: float) -> int:
    """The largest normal lag, but no less than the time between loads (``cadence``: just
    before the next load a table is that old, and nothing is wrong), plus headroom; rounded
    up to the hour (to the minute below 2h)."""
    with_headroom = max(largest_normal_lag, cadence, 0.0) * (1 + HEADROOM)
    step = 3600 if with_headroom >= 7200 else 60
    return max(step, math.ceil(with_headroom / step) * step)


def _cadence(history: History, snapshot_ids: list[str]) -> float:
    """The median time between consecutive snapshots (seconds): how often the table loads."""
    times = sorted(t for sid in snapshot_ids if (t := history.as_of_ms(sid)) is not None)
    gaps = [(later - earlier) / 1000 for earlier, later in pairwise(times)]
    return statistics.median(gaps) if gaps else 0.0


def discover_freshness(history: History, incident_urn: str) -> LearnedFinding | None:
    """The timestamp column whose lag separates the incident's snapshots from the normal ones
    learned from (the earlier two thirds), with ``max_age`` learned from the normal lags."""
    failures = set(failure_snapshots(history, incident_urn))
    timed = [s.snapshot_id for s in history.snapshots if history.as_of_ms(s.snapshot_id)]
    if not failures or not timed:
        return None
    split = split_for_learning(history, failures, timed)
    cadence = _cadence(history, split.normal)
    best: tuple[float, str, int, list[float], dict[str, float | None]] | None = None
    for field in _timestamp_columns(history):
        lags = snapshot_lags(history, field, split.learned)
        normal = [lags.get(sid) for sid in split.normal]
        incident = [lags[sid] for sid in split.failures if sid in lags]
        if not incident or not normal or any(lag is None for lag in normal):
            continue  # not a time in every normal snapshot: not the table's timestamp
        normal_lags = [lag for lag in normal if lag is not None]
        max_age = _learned_max_age(max(normal_lags), cadence)
        worst_fresh = min(math.inf if lag is None else lag for lag in incident)
        if not worst_fresh > max_age:
            continue
        margin = worst_fresh / max_age
        if best is None or margin > best[0]:
            best = (margin, field, max_age, normal_lags, lags)
    if best is None:
        return None
    _, field, max_age, normal_lags, lags = best
    incident_lags = ", ".join(
        f"{sid} lags {'with no time at all' if lags[sid] is None else format_duration(lags[sid])}"
        for sid in sorted(split.failures)
        if sid in lags
    )
    fact = (
        f"in the {len(normal_lags)} normal snapshots learned from, the newest {field} lags at "
        f"most {format_duration(max(normal_lags))} behind the snapshot's time (median "
        f"{format_duration(statistics.median(normal_lags))}), taken every "
        f"{format_duration(cadence)}; {incident_lags}; max_age {format_duration(max_age)} is "
        f"the larger of the two with {HEADROOM:.0%} headroom"
    )
    spec_age = f"{max_age // 3600}h" if max_age % 3600 == 0 else f"{max_age // 60}m"
    control = {"type": "freshness", "max_age": spec_age, "timestamp_field": field}
    return LearnedFinding(control, fact, split)


# --- the kind ------------------------------------------------------------------------------------
STALE_WORDS = re.compile(
    r"\b(stale|out[- ]of[- ]date|outdated|not (?:been )?(?:updated|refreshed)|"
    r"(?:loader|pipeline|job|ingestion|sync|feed|export)s? (?:had |has )?(?:silently )?"
    r"(?:stopped|stalled|hung|froze)|no new (?:data|rows|records)|"
    r"(?:hasn't|had not|hadn't|has not) (?:been )?(?:updated|refreshed|loaded)|"
    r"(?:days?|hours?) (?:old|behind|late)|freshness)\b",
    re.IGNORECASE,
)


class StaleDataKind(LessonKind):
    pattern = STALE_DATA
    title = "A table that stopped being refreshed"
    controls = (FreshnessControl,)
    #: staleness is the absence of an event: only the schedule can see it
    triggers = frozenset({Trigger.SCHEDULE})
    key_signals = False  # how old a table is does not depend on which fields are keys

    def words(self, text: IncidentText) -> list[Evidence]:
        return quotes(text, STALE_WORDS)

    def signals(
        self,
        query: SimilarityQuery,
        source: DatasetContext,
        candidate: DatasetContext,
        relation: LineageRelation | None,
        status_of: StatusOf,
        config: SimilarityConfig,
    ) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals, where the candidate's counterpart of ``timestamp_field`` is the
        field of that name (or a synonym), else its only date or timestamp field: each table
        names its load time its own way (``posted_at``, ``settled_at``)."""
        try:
            return super().signals(query, source, candidate, relation, status_of, config)
        except Excluded:
            field = getattr(query.control, "timestamp_field", None)
            if field is None:
                raise
        times = [f for f in candidate.fields if type_family(f) in ("time", "date")]
        if len(times) != 1:
            names = ", ".join(f.name for f in times[:5])
            raise Excluded(
                f"no field {field}, and {'several' if times else 'no'} date or timestamp "
                f"fields{f' ({names})' if times else ''} to judge its age by"
            )
        match = FieldMatch(source_fields(source, [field])[0], times[0], "role")
        signals = schema_signals(source, candidate, [match], relation, config, self.key_signals)
        return signals, {field: times[0].name}

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        name = display_name(facts.source.urn) if facts.source else "the dataset"
        finding = discover_freshness(facts.history, text.urn) if facts.history else None
        return learned_draft(
            self.pattern,
            unique(evidence),
            finding,
            found=(
                f"The loader of {name} stopped and nothing checked how old its newest rows "
                "were, so consumers read stale data.",
                "The history shows the incident's snapshots lagging far more behind their "
                "time than any normal snapshot did.",
            ),
            not_found=(
                f"The loader of {name} stopped and its data went stale.",
                "No timestamp column in the history separates the incident's snapshots from "
                "the normal ones: a steward must set max_age (and timestamp_field, or none to "
                "judge DataHub's last recorded update).",
            ),
        )
