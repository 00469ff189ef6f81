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

from reflex_actions.backtest.history import History, split_for_learning
from reflex_actions.controls.freshness import (
    _TEXT_TYPES,
    _TIMESTAMP_TYPES,
    _ZONED_TYPES,
    FreshnessControl,
)
from reflex_actions.errors import SnapshotError
from reflex_actions.kinds.base import LearnedFinding, LessonKind, Trigger, learned_draft
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import unique
from reflex_actions.similarity.fields import FieldMatch, type_family
from reflex_actions.similarity.models import Excluded, Signal
from reflex_actions.similarity.schema_signals import schema_signals, source_fields
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.times import (
    MAX_DURATION_SECONDS,
    format_duration,
)
from reflex_actions.vocabulary import display_name

STALE_DATA = "stale_data"
#: The share a learned ``max_age`` leaves above the largest normal lag.
HEADROOM = 0.25


# --- evidence from the history -------------------------------------------------------------------
#: A bound on any lag judged (a lag beyond it is "no time at all").
_NO_BOUND = f"{MAX_DURATION_SECONDS // 86400}d"


def snapshot_lags(history: History, field: str, snapshot_ids: list[str]) -> dict[str, float | None]:
    """Each snapshot's lag in seconds (its as-of time minus the newest ``field`` value; None
    when it holds no readable time), measured by the control itself, so a time beyond its
    ``future_tolerance`` is none; a time ahead within it is no lag (0), never a negative one.
    Snapshots without an as-of time, or that cannot be read, are left out."""
    from reflex_actions.executor import run_control  # the engine, only when measuring
    from reflex_actions.snapshots import duckdb_connection

    control = FreshnessControl(max_age=_NO_BOUND, timestamp_field=field)
    wanted = set(snapshot_ids)
    lags: dict[str, float | None] = {}
    with duckdb_connection() as con:
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
    from reflex_actions.snapshots import duckdb_connection

    with duckdb_connection() as con:
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
    incident_words = STALE_WORDS
    controls = (FreshnessControl,)
    #: staleness is the absence of an event: only the schedule can see it
    triggers = frozenset({Trigger.SCHEDULE})
    key_signals = False  # how old a table is does not depend on which fields are keys

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals, where the candidate's counterpart of ``timestamp_field`` is the
        field of that name (or a synonym), else its only date or timestamp field: each table
        names its load time its own way (``posted_at``, ``settled_at``)."""
        try:
            return super().signals(seen)
        except Excluded:
            field = getattr(seen.query.control, "timestamp_field", None)
            if field is None:
                raise
        source, candidate = seen.source, seen.candidate
        times = [f for f in candidate.fields if type_family(f) in ("time", "date")]
        if len(times) != 1:
            names = ", ".join(f.name for f in times[:5])
            raise Excluded(
                f"no field {field}, and {'several' if times else 'no'} date or timestamp "
                f"fields{f' ({names})' if times else ''} to judge its age by"
            )
        match = FieldMatch(source_fields(source, [field])[0], times[0], "role")
        signals = schema_signals(
            source, candidate, [match], seen.relation, seen.config, self.key_signals
        )
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
