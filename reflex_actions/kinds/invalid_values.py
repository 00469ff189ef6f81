"""Invalid values: the kind drafting ``accepted_values`` and ``value_range`` controls
(:mod:`reflex_actions.controls.values`).

Words: invalid, unexpected or unknown values, out of range, negative amounts. Evidence, from one
query over the history: a low-cardinality field whose incident snapshot holds values no normal
snapshot holds (-> ``accepted_values`` with the normal set), or a numeric field whose incident
snapshot leaves the normal range (-> ``value_range`` with readable bounds around it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any

from reflex_actions.backtest.history import History, LearningSplit, split_for_learning
from reflex_actions.bounded import excerpt
from reflex_actions.catalog.models import FieldInfo
from reflex_actions.controls.values import AcceptedValuesControl, ValueRangeControl
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.snapshots import FILE_COLUMN, SnapshotFile, duckdb_connection, files_relation
from reflex_actions.sql import indent, quote_identifier
from reflex_actions.vocabulary import display_name

# DuckDB is imported where a query runs: defining the kinds and controls (all that
# `control compile` needs) starts no engine.
if TYPE_CHECKING:
    import duckdb

INVALID_VALUES = "invalid_values"
#: Most distinct normal values a field may hold for its normal set to become accepted values.
MAX_LEARNED_VALUES = 50
#: A row's value as the text the history's evidence compares ({column} is the quoted column), and
#: that text read as a number (NULL when it is not one): DuckDB text of the one query drafting
#: runs over a whole history (the controls build the same as trees: ``controls.values.Value``).
VALUE_AS_TEXT = "CAST({column} AS VARCHAR)"
TEXT_AS_NUMBER = "TRY_CAST({text} AS DOUBLE)"


# --- evidence from the history -------------------------------------------------------------------
@dataclass(frozen=True)
class ValueFinding:
    """A field whose incident snapshot(s) broke what the normal snapshots show, as a control
    whose parameters were learned from the snapshots ``learned_from`` names."""

    field: str
    control: dict[str, Any]
    fact: str
    learned_from: LearningSplit


@dataclass(frozen=True)
class _FieldProfile:
    field: str
    normal_distinct: int
    normal_values: list[str] | None  # None: more than MAX_LEARNED_VALUES
    new_values: list[tuple[str, int]]  # the most frequent few
    new_value_rows: int
    normal_numeric: bool
    normal_min: float | None
    normal_max: float | None
    failed_min: float | None
    failed_max: float | None


#: DataHub type classes a field's values are judged under: a number by its range, other
#: values (text, or an untyped field of non-numbers) by their set.
NUMERIC_TYPE = "number"
JUDGED_TYPES = {"string", NUMERIC_TYPE, None}


def discover_value_findings(
    history: History, fields: list[FieldInfo], incident_urn: str
) -> list[ValueFinding]:
    """What the history shows about the values the incident broke: fields whose failure
    snapshot(s) hold values none of the normal snapshots learned from holds, in schema order;
    key fields are left out (their values are always new). The accepted set and the bounds
    are learned from the earlier normal snapshots only (:func:`split_for_learning`), so the
    later ones stay held out for the backtest."""

    failures = set(failure_snapshots(history, incident_urn))
    candidates = [f for f in fields if not f.is_key and f.type in JUDGED_TYPES]
    if not failures or not candidates:
        return []
    names = [f.name for f in candidates]
    con = duckdb_connection()
    try:
        usable = history.snapshots_with(con, names)
        split = split_for_learning(history, failures, [s.snapshot_id for s in usable])
        profiles = _profiles(con, usable, names, split)
    finally:
        con.close()
    findings = []
    for info in candidates:
        profile = profiles.get(info.name)
        if profile is None:
            continue
        numeric = info.type == NUMERIC_TYPE or (info.type is None and profile.normal_numeric)
        finding = _ranged(profile, split) if numeric else _listed(profile, split)
        if finding is not None:
            findings.append(finding)
    return findings


def _listed(profile: _FieldProfile, split: LearningSplit) -> ValueFinding | None:
    if not profile.normal_values or not profile.new_values:
        return None
    values: list[str | float] = list(profile.normal_values)
    new = ", ".join(f"{excerpt(value)} ({rows})" for value, rows in profile.new_values)
    fact = (
        f"{profile.field} holds {profile.normal_distinct} distinct values in the "
        f"{_learned(split)}; {', '.join(split.failures)} has {profile.new_value_rows} rows with "
        f"values never seen before: {new}"
    )
    control = {"type": "accepted_values", "field": profile.field, "values": values}
    return ValueFinding(profile.field, control, fact, split)


def _learned(split: LearningSplit) -> str:
    return f"{len(split.normal)} normal snapshots learned from"


def _ranged(profile: _FieldProfile, split: LearningSplit) -> ValueFinding | None:
    lowest, highest = profile.normal_min, profile.normal_max
    if not profile.normal_numeric or lowest is None or highest is None:
        return None
    low = 0 if lowest >= 0 else _readable(lowest, ROUND_FLOOR)
    high = _readable(highest, ROUND_CEILING)
    below = profile.failed_min is not None and profile.failed_min < low
    above = profile.failed_max is not None and profile.failed_max > high
    if not (below or above):
        return None
    fact = (
        f"{profile.field} ranges from {_shown(lowest)} to {_shown(highest)} in the "
        f"{_learned(split)}; {', '.join(split.failures)} holds values from "
        f"{_shown(profile.failed_min)} to {_shown(profile.failed_max)}"
    )
    control = {"type": "value_range", "field": profile.field, "min": low, "max": high}
    return ValueFinding(profile.field, control, fact, split)


def _readable(value: float, rounding: str) -> int | float:
    """``value`` rounded outwards to two significant digits (9_512_000 -> 9_600_000)."""
    if value == 0:
        return 0
    exact = Decimal(repr(value))
    step = Decimal(1).scaleb(exact.copy_abs().adjusted() - 1)
    rounded = (exact / step).to_integral_value(rounding=rounding) * step
    return int(rounded) if rounded == rounded.to_integral_value() else float(rounded)


def _shown(value: float | None) -> str:
    return "?" if value is None else str(int(value)) if value.is_integer() else str(value)


def _profiles(
    con: duckdb.DuckDBPyConnection,
    usable: list[SnapshotFile],
    names: list[str],
    split: LearningSplit,
) -> dict[str, _FieldProfile]:
    """Each field's values over the normal snapshots learned from and the failure snapshots, in
    one DuckDB query over those files (the held-out ones are not read)."""
    import duckdb

    normal = [s for s in usable if s.snapshot_id in split.normal]
    failed = [s for s in usable if s.snapshot_id in split.failures]
    if not normal or not failed:
        return {}
    relation = files_relation(normal + failed, names)
    file = quote_identifier(FILE_COLUMN)
    cells = "\n    UNION ALL\n    ".join(
        f"SELECT $field_{i} AS field, {file} AS file, "
        f"{VALUE_AS_TEXT.format(column=quote_identifier(name))} AS value FROM snapshot"
        for i, name in enumerate(names)
    )
    sql = f"""WITH snapshot AS (
{indent(relation.sql)}
),
cells AS (
    {cells}
),
value_counts AS (
    SELECT field, value, {TEXT_AS_NUMBER.format(text="value")} AS number,
        count(*) FILTER (WHERE list_contains($normal_files, file)) AS normal_rows,
        count(*) FILTER (WHERE list_contains($failed_files, file)) AS failed_rows
    FROM cells
    WHERE value IS NOT NULL
    GROUP BY field, value
)
SELECT
    field,
    count(*) FILTER (WHERE normal_rows > 0) AS normal_distinct,
    CASE WHEN count(*) FILTER (WHERE normal_rows > 0) <= $max_learned
        THEN list(value ORDER BY value) FILTER (WHERE normal_rows > 0) END AS normal_values,
    (list(row(value, failed_rows) ORDER BY failed_rows DESC, value)
        FILTER (WHERE normal_rows = 0 AND failed_rows > 0))[1:5] AS new_values,
    coalesce(sum(failed_rows) FILTER (WHERE normal_rows = 0), 0) AS new_value_rows,
    coalesce(bool_and(number IS NOT NULL) FILTER (WHERE normal_rows > 0), false) AS numeric,
    min(number) FILTER (WHERE normal_rows > 0) AS normal_min,
    max(number) FILTER (WHERE normal_rows > 0) AS normal_max,
    min(number) FILTER (WHERE failed_rows > 0) AS failed_min,
    max(number) FILTER (WHERE failed_rows > 0) AS failed_max
FROM value_counts
GROUP BY field"""
    params = {
        **relation.params,
        **{f"field_{i}": name for i, name in enumerate(names)},
        "normal_files": [s.read_path for s in normal],
        "failed_files": [s.read_path for s in failed],
        "max_learned": MAX_LEARNED_VALUES,
    }
    try:
        rows = con.execute(sql, params).fetchall()
    except duckdb.Error:
        return {}
    return {
        row[0]: _FieldProfile(
            field=row[0],
            normal_distinct=row[1],
            normal_values=row[2],
            new_values=[tuple(item) for item in row[3] or []],
            new_value_rows=int(row[4]),
            normal_numeric=row[5],
            normal_min=row[6],
            normal_max=row[7],
            failed_min=row[8],
            failed_max=row[9],
        )
        for row in rows
    }


# --- the kind ------------------------------------------------------------------------------------
INVALID_WORDS = re.compile(
    r"\b((?:invalid|unexpected|unknown|unsupported|unrecognised|unrecognized|illegal|bogus|"
    r"wrong) (?:values?|currenc(?:y|ies)|codes?|status(?:es)?|categor(?:y|ies))|"
    r"not (?:an? )?(?:allowed|accepted|valid) (?:values?|currenc(?:y|ies)|codes?)|"
    r"out[- ]of[- ]range|outside (?:the |its )?(?:\w+ )?range|"
    r"negative (?:amounts?|values?|prices?|quantit(?:y|ies)|totals?))",
    re.IGNORECASE,
)
#: the words that say a bound was crossed rather than an unlisted value appearing
RANGE_WORDS = re.compile(
    r"\b(out[- ]of[- ]range|outside (?:the |its )?(?:\w+ )?range|negative)\b", re.IGNORECASE
)


class InvalidValuesKind(LessonKind):
    pattern = INVALID_VALUES
    title = "Values outside what a field may hold"
    incident_words = INVALID_WORDS
    controls = (AcceptedValuesControl, ValueRangeControl)
    triggers = frozenset({Trigger.LANDED_DATA})
    key_signals = False  # whether a field is a key says nothing about the values it may hold

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        evidence = unique(evidence)
        source = facts.source
        name = display_name(source.urn) if source else "the dataset"
        fields = list(source.fields) if source else []
        findings = discover_value_findings(facts.history, fields, text.urn) if facts.history else []
        if not findings:
            return LessonDraft(
                failure_pattern=self.pattern,
                root_cause=f"Invalid values in {name}.",
                evidence=evidence,
                control=None,
                confidence=0.3,
                rationale="No history shows which field broke: a steward must name the field "
                "and the values or range it may hold.",
            )
        finding = min(findings, key=lambda f: self._rank(f, text, findings))
        evidence.append(Evidence(source="history", quote=finding.fact))
        what = "accepted set" if finding.control["type"] == "accepted_values" else "normal range"
        return LessonDraft(
            learned_from=finding.learned_from,
            failure_pattern=self.pattern,
            root_cause=f"Invalid values in {name}: {finding.field} held values outside its "
            f"{what}, and nothing rejected them.",
            evidence=evidence,
            control=finding.control,
            confidence=0.85 if len(findings) == 1 else 0.7,
            rationale=f"The history shows {finding.field} breaking its {what} only in the "
            "incident's snapshot.",
        )

    @staticmethod
    def _rank(
        finding: ValueFinding, text: IncidentText, findings: list[ValueFinding]
    ) -> tuple[bool, bool, int]:
        """Fields the incident names first, then the control its words point to, then schema
        order."""
        words = " ".join(text.fields().values())
        named = re.search(rf"\b{re.escape(finding.field)}\b", words, re.IGNORECASE) is not None
        wants_range = bool(quotes(text, RANGE_WORDS))
        fits = (finding.control["type"] == "value_range") == wants_range
        return (not named, not fits, findings.index(finding))
