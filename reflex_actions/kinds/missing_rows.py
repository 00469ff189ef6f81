"""Missing rows: a load that wrote far fewer rows than it should have (``volume``).

The control judges a snapshot's row count against absolute bounds (``min_rows``, ``max_rows``)
and, with ``max_drop``, against the median of the dataset's previous ``window`` counts: at most
that share below it. The earlier counts come from the history in a backtest (each snapshot
against the ones before it), from the assertion's earlier runs on landing, and from
``--baseline-counts`` on the command line; without any, only the absolute bounds judge, and the
result says so. A violation is a row short of the lower bound (or beyond the upper one).

Words: missing rows, a partial load, half the rows, a dropped row count. Evidence: the incident
snapshot's count against the trailing median of the normal ones; ``max_drop`` is learned from the
earlier normal snapshots only (no peeking), with headroom, and must still catch the incident.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from reflex_actions.backtest.history import (
    History,
    row_counts,
    split_for_learning,
)
from reflex_actions.controls import Control
from reflex_actions.controls.base import MAX_COUNT, count_field
from reflex_actions.errors import SnapshotNotFoundError
from reflex_actions.kinds.base import LearnedFinding, LessonKind, Trigger, learned_draft
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.sql import SNAPSHOT, ControlQuery, Relation, exp, param
from reflex_actions.vocabulary import display_name

MISSING_ROWS = "missing_rows"
#: Most earlier counts a relative rule may look back over.
MAX_WINDOW = 365
#: The smallest share a learned ``max_drop`` leaves above the largest normal drop.
HEADROOM = 0.1


class VolumeControl(Control):
    """A snapshot's row count lies within the bounds: ``min_rows`` / ``max_rows`` and, with
    ``max_drop``, at most that share below the median of the previous ``window`` counts."""

    type: Literal["volume"] = "volume"
    min_rows: int | None = Field(default=None, ge=0, le=MAX_COUNT, strict=True)
    max_rows: int | None = Field(default=None, ge=0, le=MAX_COUNT, strict=True)
    max_drop: float | None = Field(default=None, gt=0.0, lt=1.0, strict=True)
    window: int = count_field(default=7, ge=1, le=MAX_WINDOW)

    violation_unit: ClassVar[str] = "rows short of (or beyond) the bounds"
    #: the judgement a run reports, pass or fail, in the order the counts row carries it
    _measures: ClassVar[tuple[str, ...]] = (
        "row_count", "baseline_median", "lower_bound", "upper_bound", "rule",
    )  # fmt: skip

    @model_validator(mode="after")
    def _a_bound_in_order(self) -> VolumeControl:
        if self.min_rows is None and self.max_rows is None and self.max_drop is None:
            raise ValueError("give 'min_rows', 'max_rows' or 'max_drop'")
        if (
            self.min_rows is not None
            and self.max_rows is not None
            and (self.min_rows > self.max_rows)
        ):
            raise ValueError(f"min_rows {self.min_rows} is greater than max_rows {self.max_rows}")
        return self

    def required_columns(self) -> list[str]:
        return []  # it counts rows, whatever their columns

    def judged_on_recorded(self) -> frozenset[str]:
        return frozenset({"row_count"})  # a profile's rowCount: no data read

    def earlier_counts_needed(self) -> int:
        return self.window if self.max_drop is not None else 0

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def bounds(self, earlier: tuple[int, ...]) -> tuple[int | None, int | None, float | None, str]:
        """(lower bound, upper bound, the earlier counts' median, the rule that set them)."""
        lower, rule = self.min_rows, "absolute bounds"
        median = float(statistics.median(earlier)) if earlier else None
        if self.max_drop is not None and median is not None:
            relative = math.ceil(round(median * (1 - self.max_drop), 6))
            lower = relative if lower is None else max(lower, relative)
            rule = (
                f"at most {self.max_drop:.0%} below the median of the {len(earlier)} earlier "
                "counts" + (" and the absolute bounds" if self.min_rows is not None else "")
            )
        elif self.max_drop is not None:
            rule = "absolute bounds only: no earlier counts to judge the drop against"
        return lower, self.max_rows, median, rule

    def bound_from(self, relation: Relation) -> dict[str, Any]:
        """The bounds from the spec and the earlier counts, and the count the profile
        records."""
        lower, upper, median, rule = self.bounds(relation.earlier_counts)
        bound: dict[str, Any] = {
            "lower_bound": lower,
            "upper_bound": upper,
            "baseline_median": median,
            "rule": rule,
        }
        if relation.recorded is not None:
            bound["recorded_row_count"] = relation.recorded.row_count
        return bound

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """One count (the snapshot's, or the one its profile records, bound: no data read);
        the bounds are computed from the spec and the earlier counts, and bound. The counts
        row carries the judgement as its measures (the count, the earlier counts' median, the
        bounds and the rule that set them): a failing run's sample."""
        params = self.bound_from(relation)
        if relation.recorded is not None:  # the profile's count: no data read
            if relation.recorded.row_count is None:
                raise SnapshotNotFoundError(
                    "DataHub records no row count (datasetProfile.rowCount) for this dataset"
                )
            row_count: exp.Expression = param("recorded_row_count")
        else:
            row_count = exp.func("count", exp.Star())
        counted = exp.select(
            exp.cast(row_count, "BIGINT").as_("row_count"),
            exp.cast(param("baseline_median"), "DOUBLE").as_("baseline_median"),
            exp.cast(param("lower_bound"), "BIGINT").as_("lower_bound"),
            exp.cast(param("upper_bound"), "BIGINT").as_("upper_bound"),
            exp.cast(param("rule"), "VARCHAR").as_("rule"),
        )
        if relation.recorded is None:
            counted = counted.from_(SNAPSHOT)
        count, lower_bound, upper_bound = (
            exp.column(name) for name in ("row_count", "lower_bound", "upper_bound")
        )
        # a NULL bound compares to nothing: no row is short of (or beyond) it
        short = exp.Case().when(count < lower_bound, lower_bound - count).else_("0")
        beyond = exp.Case().when(count > upper_bound, count - upper_bound).else_("0")
        counts = exp.select(
            count.as_("rows_scanned"),
            (short + beyond).as_("violation_count"),
            *(exp.column(name) for name in self._measures),
        ).from_(counted.subquery("counted"))
        return ControlQuery(counts=counts, params=params, sample_is_measures=True)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(self._measures, row, strict=True))

    def describe(self) -> str:
        parts = []
        if self.min_rows is not None:
            parts.append(f"at least {self.min_rows} rows")
        if self.max_rows is not None:
            parts.append(f"at most {self.max_rows} rows")
        if self.max_drop is not None:
            parts.append(
                f"at most {self.max_drop:.0%} below the median of the last {self.window} loads"
            )
        return "a load holds " + ", ".join(parts)


# --- evidence from the history -------------------------------------------------------------------
def _drops(counts: list[int], window: int) -> list[float]:
    """Each count's drop below the median of the ``window`` counts before it (first skipped)."""
    drops = []
    for index in range(1, len(counts)):
        median = statistics.median(counts[max(0, index - window) : index])
        drops.append(1 - counts[index] / median if median else 0.0)
    return drops


def discover_volume(history: History, incident_urn: str, window: int = 7) -> LearnedFinding | None:
    """A relative rule that the learning part of the history keeps and the incident breaks:
    ``max_drop`` the largest normal drop plus headroom, rounded up to a tenth, below the
    incident's drop (each against the median of the snapshots before it, in time order)."""
    failures = set(failure_snapshots(history, incident_urn))
    counts = row_counts(history)
    if not failures or not counts:
        return None
    split = split_for_learning(history, failures, list(counts))
    learned = set(split.normal) | set(split.failures)
    ordered = [sid for sid in counts if sid in learned]  # in snapshot-id (time) order
    normal_counts = [counts[sid] for sid in ordered if sid not in failures]
    normal_drops = _drops(normal_counts, window)
    incident_drops = []
    for sid in ordered:
        if sid in failures:
            before = [counts[o] for o in ordered if o < sid and o not in failures][-window:]
            if before and statistics.median(before):
                incident_drops.append(1 - counts[sid] / statistics.median(before))
    if not incident_drops or not normal_drops:
        return None
    max_drop = math.ceil((max(max(normal_drops), 0.0) + HEADROOM) * 10) / 10
    if not max_drop < min(incident_drops) or max_drop >= 1:
        return None
    failed = ", ".join(sorted(failures & set(counts)))
    fact = (
        f"each of the {len(normal_counts)} normal snapshots learned from lies at most "
        f"{max(max(normal_drops), 0.0):.0%} below the median of the {window} before it; "
        f"{failed} lies {min(incident_drops):.0%} below"
    )
    control = {"type": "volume", "max_drop": max_drop, "window": window}
    return LearnedFinding(control, fact, split)


# --- the kind ------------------------------------------------------------------------------------
VOLUME_WORDS = re.compile(
    r"\b(missing rows|partial(?:ly)? loads?|partial(?:ly)? loaded|half (?:of )?the rows|"
    r"(?:fewer|lost|dropped) rows|rows (?:were |went )?(?:lost|missing|dropped)|"
    r"row ?counts? (?:dropped|fell|halved|collapsed)|truncated (?:loads?|tables?))\b",
    re.IGNORECASE,
)


class MissingRowsKind(LessonKind):
    pattern = MISSING_ROWS
    title = "A load with far fewer rows than usual"
    controls = (VolumeControl,)
    #: landed snapshots are counted; a new profile's rowCount is judged (on its event, and on
    #: the schedule for a profile whose event was missed)
    triggers = frozenset({Trigger.LANDED_DATA, Trigger.ASPECT_CHANGE, Trigger.SCHEDULE})
    key_signals = False  # a row count does not depend on which fields are keys

    def words(self, text: IncidentText) -> list[Evidence]:
        return quotes(text, VOLUME_WORDS)

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        name = display_name(facts.source.urn) if facts.source else "the dataset"
        finding = discover_volume(facts.history, text.urn) if facts.history else None
        return learned_draft(
            self.pattern,
            unique(evidence),
            finding,
            found=(
                f"A partial load wrote far fewer rows than usual to {name}, and nothing "
                "compared the count with the loads before it.",
                "The history shows the incident's count dropping far more below the "
                "trailing median than any normal load did.",
            ),
            not_found=(
                f"A load wrote far fewer rows than usual to {name}.",
                "No history separates the incident's row count from the normal ones: a steward "
                "must set the bounds (min_rows, or max_drop against the last loads).",
            ),
        )
