"""Invalid values: a field that must hold listed values (``accepted_values``) or numbers within a
range (``value_range``).

Words: invalid, unexpected or unknown values, out of range, negative amounts. Evidence, from one
query over the history: a low-cardinality field whose incident snapshot holds values no normal
snapshot holds (-> ``accepted_values`` with the normal set), or a numeric field whose incident
snapshot leaves the normal range (-> ``value_range`` with readable bounds around it).

Both controls judge a row's value as its text (``CAST(... AS VARCHAR)``) reads, so a CSV snapshot
(read as text) and a Parquet one give the same counts: a range reads that text as a DOUBLE, and a
listed number matches a value that reads as the same number (``1`` matches ``1.00``). Where the
column's type says that text reads back as the column's own value, the column is compared
natively instead, the same answer without a cast per row (a range over 10M DOUBLEs: 1.2 s ->
85 ms): a DOUBLE (its text is the shortest that reads back exactly), and, for a range, an
integer or DECIMAL type that holds the bounds exactly. The text is read where the types differ
or are unknown: a text column (CSV), a FLOAT (its text ``0.1`` reads as another number than the
FLOAT widened to a DOUBLE), any type this module does not know, and a DOUBLE read where a filter
may miss a NaN (``Relation.filters_see_nans``: Spark on Parquet). A NULL is never an invalid
value: missing values are another incident class.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, Strict, StringConstraints, field_validator, model_validator

from reflex_actions.backtest.history import History, LearningSplit, split_for_learning
from reflex_actions.bounded import excerpt
from reflex_actions.catalog.models import FieldInfo
from reflex_actions.controls import Control
from reflex_actions.controls.base import validate_column_name
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.snapshots import FILE_COLUMN, SnapshotFile, files_relation
from reflex_actions.sql import (
    SNAPSHOT,
    ControlQuery,
    Relation,
    column,
    exp,
    indent,
    param,
    quote_identifier,
    rows_and_violations,
)
from reflex_actions.vocabulary import display_name

# DuckDB is imported where a query runs: defining the kinds and controls (all that
# `control compile` needs) starts no engine.
if TYPE_CHECKING:
    import duckdb

INVALID_VALUES = "invalid_values"
#: Most values one ``accepted_values`` list may hold.
MAX_ACCEPTED_VALUES = 1000
#: Longest accepted text value (characters).
MAX_VALUE_CHARS = 1000
#: Largest magnitude of a number in a spec: values are compared as DOUBLE, exact up to 2**53.
MAX_NUMBER = 2**53
#: Most distinct normal values a field may hold for its normal set to become accepted values.
MAX_LEARNED_VALUES = 50
#: Values listed in a control's one-line description before "and N more".
DESCRIBED_VALUES = 10

Number = (
    Annotated[int, Strict(), Field(ge=-MAX_NUMBER, le=MAX_NUMBER)]
    | Annotated[float, Strict(), Field(ge=-MAX_NUMBER, le=MAX_NUMBER, allow_inf_nan=False)]
)
Text = Annotated[str, Strict(), StringConstraints(max_length=MAX_VALUE_CHARS)]

#: A row's value as the text the history's evidence compares ({column} is the quoted column), and
#: that text read as a number (NULL when it is not one): DuckDB text of the one query drafting
#: runs over a whole history (the controls build the same as trees, see :class:`Value`).
VALUE_AS_TEXT = "CAST({column} AS VARCHAR)"
TEXT_AS_NUMBER = "TRY_CAST({text} AS DOUBLE)"
#: The floating type compared natively, where a filter sees every NaN.
DOUBLE = "DOUBLE"


@cache
def _built_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb")


def _type(name: str) -> exp.DataType:
    """A new node of the type DuckDB calls ``name``, built once on first use: importing a kind
    imports no sqlglot (a run whose SQL was rendered before builds no tree)."""
    return _built_type(name).copy()


#: DuckDB's integer types and the values they hold.
INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
}
DECIMAL_TYPE = re.compile(r"DECIMAL\((\d{1,2}),(\d{1,2})\)")


def native_number_type(column_type: str | None, bounds: list[int | float]) -> str | None:
    """The engine type to compare a numeric column with these bounds in, when that gives the
    same answer as comparing DOUBLEs: a DOUBLE (every bound is one), or an integer or DECIMAL
    type holding every bound exactly. None otherwise: text, FLOAT, unknown types, a bound with
    more decimals than the column or beyond its range."""
    if column_type == DOUBLE:
        return DOUBLE
    exact = [
        Decimal(repr(bound)) if isinstance(bound, float) else Decimal(bound) for bound in bounds
    ]
    if column_type in INTEGER_RANGES:
        low, high = INTEGER_RANGES[column_type]
        fits = all(value == value.to_integral_value() and low <= value <= high for value in exact)
        return column_type if fits else None
    decimal = DECIMAL_TYPE.fullmatch(column_type or "")
    if decimal is None:
        return None
    precision, scale = int(decimal[1]), int(decimal[2])
    fits = all(
        value.as_tuple().exponent >= -scale and abs(value) < Decimal(10) ** (precision - scale)
        for value in exact
    )
    return f"DECIMAL({precision},{scale})" if fits else None


@dataclass(frozen=True)
class Value:
    """A row's value of the judged field as trees: the column itself, its text (what both
    controls compare, so a CSV snapshot read as text and a Parquet one count alike), and that
    text read as a number (NULL when it is not one)."""

    column: exp.Column
    text: exp.Expression
    number: exp.Expression

    @classmethod
    def of(cls, name: str, column_type: str | None) -> Value:
        """A DOUBLE column is its own number; an integer or DECIMAL one is cast to a number
        directly (the number its text reads as; such a cast cannot fail). Any other value's
        text is read as one softly (NULL when it is none), text columns and unknown types
        alike."""
        field = column(name)
        text = exp.Cast(this=field.copy(), to=_type("VARCHAR"))
        if column_type == DOUBLE:
            return cls(field, text, field.copy())
        if column_type in INTEGER_RANGES or DECIMAL_TYPE.fullmatch(column_type or ""):
            return cls(field, text, exp.Cast(this=field.copy(), to=_type(DOUBLE)))
        return cls(field, text, exp.TryCast(this=text.copy(), to=_type(DOUBLE), safe=True))


class FieldValuesControl(Control):
    """A control judging each non-NULL value of one field; a violation is a row whose value is
    not allowed, and the sample lists the offending values with their row counts, most first."""

    field: str

    violation_unit: ClassVar[str] = "rows with invalid values"

    @field_validator("field")
    @classmethod
    def _check_field(cls, value: str) -> str:
        return validate_column_name(value)

    @abstractmethod
    def offending(
        self, value: Value, column_type: str | None
    ) -> tuple[exp.Expression, dict[str, Any]]:
        """The condition on a non-NULL ``value`` that makes it invalid (on its text, it as a
        number, or the column itself when its engine type ``column_type`` allows the same
        judgement natively), and the values it binds."""

    def required_columns(self) -> list[str]:
        return [self.field]

    def with_dataset_fields(self, mapping: dict[str, str]) -> FieldValuesControl:
        renamed = {"field": mapping.get(self.field, self.field)}
        return type(self).model_validate({**self.model_dump(exclude_none=True), **renamed})

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """Counts: every row, and those whose non-NULL value is invalid. The sample, run only
        on failure, groups the invalid values by their text, most rows first (a wide column is
        never grouped whole). A DOUBLE read where a filter may miss a NaN (a NaN is above every
        number: outside any range with a maximum, and in no list) is judged as a value of an
        unknown type, by its text, which no statistics prune by."""
        column_type = relation.types.get(self.field)
        if column_type == DOUBLE and not relation.filters_see_nans:
            column_type = None
        value = Value.of(self.field, column_type)
        condition, params = self.offending(value, column_type)
        invalid = exp.and_(value.column.is_(exp.null()).not_(), exp.paren(condition))
        occurrences = exp.func("count", exp.Star())
        sample = (
            exp.select(value.text.as_("value"), occurrences.as_("occurrences"))
            .from_(SNAPSHOT)
            .where(invalid.copy())
            .group_by(value.text.copy())
            .order_by(
                exp.Ordered(this=exp.column("occurrences"), desc=True),
                exp.Ordered(this=exp.column("value")),
            )
            .limit(sample_size)
        )
        if relation.row_count_is_free and sample_size > 0:
            # one scan of the invalid rows, counting and grouping them: the rows are counted
            # by the footer, and the sample's groups add up to the violation count
            total = exp.Window(this=exp.func("sum", occurrences.copy()))
            return ControlQuery(
                counts=exp.select(exp.func("count", exp.Star()).as_("rows_scanned")).from_(
                    SNAPSHOT
                ),
                sample=sample.select(total.as_("violation_count")),
                params=params,
                sample_totals=True,
            )
        return ControlQuery(
            counts=rows_and_violations(invalid, relation), sample=sample, params=params
        )

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        value, occurrences = row
        return {"value": value, "occurrences": occurrences}


class AcceptedValuesControl(FieldValuesControl):
    """Every non-NULL value of ``field`` is one of ``values`` (texts compare exactly, numbers
    by value)."""

    type: Literal["accepted_values"] = "accepted_values"
    values: list[Text | Number] = Field(min_length=1, max_length=MAX_ACCEPTED_VALUES)

    @field_validator("values")
    @classmethod
    def _no_value_twice(cls, values: list[str | float]) -> list[str | float]:
        seen: set[tuple[bool, str | float]] = set()
        for value in values:
            key = (isinstance(value, str), value)  # 1 and 1.0 are one number; "1" is text
            if key in seen:
                raise ValueError(f"values lists {excerpt(value)} twice")
            seen.add(key)
        return values

    def offending(
        self, value: Value, column_type: str | None
    ) -> tuple[exp.Expression, dict[str, Any]]:
        """Neither a listed text nor a listed number: an ``IN`` list of one placeholder per
        value (a value that is no number is in no list of numbers)."""
        texts = [listed for listed in self.values if isinstance(listed, str)]
        numbers = [float(listed) for listed in self.values if not isinstance(listed, str)]
        params = {f"accepted_{i}": listed for i, listed in enumerate([*texts, *numbers])}
        placeholders = [param(name) for name in params]
        accepted: list[exp.Expression] = []
        if texts:
            listed = placeholders[: len(texts)]
            accepted.append(exp.In(this=value.text.copy(), expressions=listed))
        if numbers:
            among = exp.In(this=value.number.copy(), expressions=placeholders[len(texts) :])
            accepted.append(exp.func("coalesce", among, exp.false()))
        return exp.or_(*accepted).not_(), params

    def describe(self) -> str:
        shown = ", ".join(str(value) for value in self.values[:DESCRIBED_VALUES])
        more = len(self.values) - DESCRIBED_VALUES
        return f"{self.field} is one of {shown}" + (f" and {more} more" if more > 0 else "")


class ValueRangeControl(FieldValuesControl):
    """Every non-NULL value of ``field`` is a number within [``min``, ``max``] (inclusive; a
    value that is not a number is outside any range)."""

    type: Literal["value_range"] = "value_range"
    min: Number | None = None
    max: Number | None = None

    @model_validator(mode="after")
    def _a_bound_in_order(self) -> ValueRangeControl:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def offending(
        self, value: Value, column_type: str | None
    ) -> tuple[exp.Expression, dict[str, Any]]:
        """On a DOUBLE column, or an integer or DECIMAL one whose type holds both bounds
        exactly, the column is compared in its own type (no per-row cast: the filter reaches the
        scan, as a hand-written one does); otherwise the value read as a DOUBLE is, and one
        that is no number is outside."""
        bounds = {
            name: bound
            for name, bound in (("min", self.min), ("max", self.max))
            if bound is not None
        }
        params = {name: float(bound) for name, bound in bounds.items()}
        native = native_number_type(column_type, list(bounds.values()))
        if native is not None:
            outside = [
                (exp.LT if name == "min" else exp.GT)(
                    this=value.column.copy(),
                    expression=exp.Cast(this=param(name), to=_type(native)),
                )
                for name in params
            ]
            return exp.or_(*outside), params
        within = [
            (exp.GTE if name == "min" else exp.LTE)(
                this=value.number.copy(), expression=param(name)
            )
            for name in params
        ]
        return exp.func("coalesce", exp.and_(*within), exp.false()).not_(), params

    def describe(self) -> str:
        if self.max is None:
            return f"{self.field} is a number of at least {self.min}"
        if self.min is None:
            return f"{self.field} is a number of at most {self.max}"
        return f"{self.field} is a number from {self.min} to {self.max}"


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
    import duckdb

    failures = set(failure_snapshots(history, incident_urn))
    candidates = [f for f in fields if not f.is_key and f.type in JUDGED_TYPES]
    if not failures or not candidates:
        return []
    names = [f.name for f in candidates]
    con = duckdb.connect()
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
    controls = (AcceptedValuesControl, ValueRangeControl)
    triggers = frozenset({Trigger.LANDED_DATA})
    key_signals = False  # whether a field is a key says nothing about the values it may hold

    def words(self, text: IncidentText) -> list[Evidence]:
        return quotes(text, INVALID_WORDS)

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
