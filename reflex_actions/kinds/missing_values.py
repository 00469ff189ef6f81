"""Missing values: a field that must be filled arrived NULL (``not_null``).

Words: null, missing value, empty or blank field. "Missing rows" and "empty table" are volume
incidents, not this one. Evidence: a field with no NULL in every normal snapshot of the history
and NULLs in the incident's labelled snapshot(s); else a declared key field the incident names;
else a draft without a control that a steward completes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.controls.base import MAX_LIST_ITEMS, FieldsControl, column_list
from reflex_actions.kinds.base import LessonKind, StatusOf, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import fields_broken_in_failures
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.lineage import Relation as LineageRelation
from reflex_actions.similarity.models import Excluded, Signal, SimilarityQuery
from reflex_actions.similarity.schema_signals import matched_fields, schema_signals, source_fields
from reflex_actions.sql import (
    SNAPSHOT,
    ControlQuery,
    Relation,
    column,
    count_where,
    exp,
    param,
    rows_and_violations,
)
from reflex_actions.vocabulary import display_name

MISSING_VALUES = "missing_values"

NULL_WORDS = re.compile(
    r"\b(null(?:s|ed)?|null values?|missing values?|unpopulated|not populated|"
    r"(?:empty|blank) (?:values?|fields?|columns?|strings?|cells?)|blanks?|left blank)\b",
    re.IGNORECASE,
)


#: Most columns of a relation a sampled row is shown with when no key column names it.
MAX_ROW_COLUMNS = 3
#: The column types (DuckDB's names, in which every engine describes a relation) whose values
#: tell one row from another: integers, decimals, text, UUIDs, dates and times; not floats,
#: booleans, binary or nested values.
IDENTIFYING_TYPE = re.compile(
    r"U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|DECIMAL(\(\d+,\d+\))?|VARCHAR|UUID|DATE|"
    r"TIME(STAMP(_S|_MS|_NS)?)?( WITH TIME ZONE)?",
    re.IGNORECASE,
)


class NotNullControl(FieldsControl):
    """The listed field(s) hold a value in every row, or in all but ``max_null_fraction`` of them.

    A violation is a row where a listed field IS NULL; the snapshot passes while there are at
    most ``floor(max_null_fraction * rows)`` of them (none by default).
    """

    type: Literal["not_null"] = "not_null"
    #: the columns whose values identify a sampled row (default: the checked fields; a checked
    #: field, NULL in the rows sampled, is never shown as their key)
    key: list[str] | None = Field(default=None, min_length=1, max_length=MAX_LIST_ITEMS)
    max_null_fraction: float = Field(default=0.0, ge=0.0, le=1.0, strict=True)

    violation_unit: ClassVar[str] = "rows with a NULL"

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: list[str] | None) -> list[str] | None:
        return column_list(value, "key")

    @property
    def checked_fields(self) -> list[str]:
        return self.listed_fields

    @property
    def sample_key(self) -> list[str]:
        return list(self.key) if self.key is not None else self.checked_fields

    @property
    def identifying_key(self) -> list[str]:
        """The key columns that tell the sampled rows apart: the checked fields are NULL in
        them (in every one, with one field checked)."""
        return [name for name in self.sample_key if name not in self.checked_fields]

    def row_columns(self, relation: Relation) -> list[str]:
        """What a sampled row is shown with when no key column identifies it: the relation's
        first few other columns of an identifying type, else (its columns unknown, or none
        such) the checked fields."""
        others = [
            name
            for name, kind in relation.types.items()
            if name not in self.checked_fields and IDENTIFYING_TYPE.fullmatch(kind)
        ]
        return others[:MAX_ROW_COLUMNS] or self.checked_fields

    def required_columns(self) -> list[str]:
        return list(dict.fromkeys([*self.checked_fields, *self.sample_key]))

    def with_dataset_fields(self, mapping: dict[str, str]) -> NotNullControl:
        spec: dict[str, Any] = {
            **self.model_dump(exclude_none=True),
            **self.renamed_fields(mapping),
        }
        if self.key is not None:
            spec["key"] = [mapping.get(name, name) for name in self.key]
        return NotNullControl.model_validate(spec)

    def allowed_violations(self, rows_scanned: int) -> int:
        # as the decimal the steward wrote: 0.29 of 100 rows allows 29, not 28.999...
        return int(Decimal(str(self.max_null_fraction)) * rows_scanned)

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """Counts: every row, and those with a NULL. The sample, run only on failure, is the first
        rows with a NULL by key (then by which fields are NULL: a limit reads only those),
        each beside every checked field's NULL count (one more pass over the NULL rows, unless
        one field is checked: its NULL count is the violation count).

        A key of only checked fields (the default) tells no NULL row from another: the rows are
        shown with a few other columns instead (:meth:`row_columns`), their names bound and
        selected beside their values (they depend on the relation, which ``sample_row`` does
        not see), and sorted by them as by a key.

        One field checked, its NULL rows hold it NULL and its flag true in every row: the sample
        sorts by the other columns shown only (none: any rows are the same rows), so a server
        stops at the limit instead of sorting every NULL row."""
        nulls = [column(name).is_(exp.null()) for name in self.checked_fields]
        any_null = exp.or_(*nulls)
        counts = rows_and_violations(any_null, relation)
        key = self.identifying_key
        if key:
            named: dict[str, str] = {}
        else:
            key = self.row_columns(relation)
            named = {f"name_{i}": name for i, name in enumerate(key)}
        # positional names: a key may be named like anything this query would call a column
        keys = {f"key_{i}": column(name) for i, name in enumerate(key)}
        shown: dict[str, exp.Expression] = {
            **{alias: exp.cast(param(alias), "VARCHAR") for alias in named},
            **keys,
            **{f"null_{i}": null for i, null in enumerate(nulls)},
        }
        first = (
            exp.select(*(value.copy().as_(name) for name, value in shown.items()))
            .from_(SNAPSHOT)
            .where(any_null.copy())
            .limit(sample_size)
        )
        if len(nulls) == 1:  # its NULL rows are the violations: the counts hold their number
            varying = [column(name) for name in key if name != self.checked_fields[0]]
            sample = first.order_by(*_first(varying)) if varying else first
            return ControlQuery(counts=counts, sample=sample, params=named, sample_counted=True)
        first = first.order_by(*_first([*keys.values(), *nulls]))
        counted = {f"count_{i}": null for i, null in enumerate(nulls)}
        null_counts = (
            exp.select(*(count_where(null.copy()).as_(name) for name, null in counted.items()))
            .from_(SNAPSHOT)
            .where(any_null.copy())
        )
        picked = [exp.column(name, "first_nulls") for name in shown]
        sample = (
            exp.select(*picked, *(exp.column(name, "null_counts") for name in counted))
            .from_(first.subquery("first_nulls"))
            .join(null_counts.subquery("null_counts"), join_type="cross")
            .order_by(*_first(picked[len(named) :]))
        )
        return ControlQuery(counts=counts, sample=sample, params=named)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """The row's key values (``key``), or, with no key column to tell the rows apart, the
        columns it was shown with (``row``, their names read from the row), and its NULLs."""
        checked = len(self.checked_fields)
        if self.identifying_key:
            shown, names = "key", self.identifying_key
        else:  # the names come first, then their values, the NULL flags and the NULL counts
            shown, names = "row", list(row[: (len(row) - 2 * checked) // 2])
            row = row[len(names) :]
        values, is_null, null_counts = row[: len(names)], row[len(names) : -checked], row[-checked:]
        return {
            shown: dict(zip(names, values, strict=True)),
            "null_fields": [
                name for name, null in zip(self.checked_fields, is_null, strict=True) if null
            ],
            "null_counts": dict(zip(self.checked_fields, null_counts, strict=True)),
        }

    def describe(self) -> str:
        listed = ", ".join(self.checked_fields)
        if self.max_null_fraction:
            return f"({listed}) is NULL in at most {self.max_null_fraction:.2%} of rows"
        return f"({listed}) is never NULL"


@dataclass(frozen=True)
class NullFinding:
    """A field filled in every normal snapshot and NULL in the incident's failure snapshot(s)."""

    field: str
    failure_snapshots: tuple[str, ...]
    null_rows: int
    normal_snapshots: int


def discover_null_fields(
    history: History, fields: list[FieldInfo], incident_urn: str
) -> list[NullFinding]:
    """Fields with no NULL in every normal snapshot and NULLs in a failure snapshot, counted in
    one DuckDB query over the history. Empty without a labelled failure or readable snapshot."""
    return [
        NullFinding(*found)
        for found in fields_broken_in_failures(
            history,
            incident_urn,
            [f.name for f in fields],
            lambda column: f"count(*) FILTER (WHERE {column} IS NULL)",
        )
    ]


class MissingValuesKind(LessonKind):
    pattern = MISSING_VALUES
    title = "Missing values in a field that must be filled"
    controls = (NotNullControl,)
    triggers = frozenset({Trigger.LANDED_DATA})

    def words(self, text: IncidentText) -> list[Evidence]:
        return quotes(text, NULL_WORDS)

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        evidence = unique(evidence)
        source = facts.source
        name = display_name(source.urn) if source else "the dataset"
        fields = list(source.fields) if source else []
        keys = [f.name for f in fields if f.is_key]
        findings = discover_null_fields(facts.history, fields, text.urn) if facts.history else []
        if findings:
            for finding in findings:
                evidence.append(
                    Evidence(
                        source="history",
                        quote=f"{finding.field} has no NULL in all {finding.normal_snapshots} "
                        f"normal snapshots and {finding.null_rows} NULL rows in "
                        f"{', '.join(finding.failure_snapshots)}",
                    )
                )
            nulled = [finding.field for finding in findings]
            return LessonDraft(
                failure_pattern=self.pattern,
                root_cause=f"Missing values in {name}: {', '.join(nulled)} arrived NULL "
                "where every earlier load filled it.",
                evidence=evidence,
                control=_not_null_spec(nulled, keys),
                confidence=0.9,
                rationale=f"{', '.join(nulled)} is always filled in the history and NULL only "
                "in the incident's snapshot(s).",
            )
        named = [key for key in keys if _names(text, key)]
        if named:
            evidence.append(
                Evidence(
                    source="catalog",
                    quote=f"{name} declares the key ({', '.join(keys)}); "
                    f"the incident names {', '.join(named)}",
                )
            )
        return LessonDraft(
            failure_pattern=self.pattern,
            root_cause=f"Missing values in {name}: "
            + (f"{', '.join(named)} arrived NULL." if named else "a field arrived NULL."),
            evidence=evidence,
            control=_not_null_spec(named, keys) if named else None,
            confidence=0.6 if named else 0.3,
            rationale="No history shows which field went NULL; the key field the incident "
            "names is proposed."
            if named
            else "No history and no key field named in the incident: a steward must name the "
            "field that must be filled.",
        )

    def signals(
        self,
        query: SimilarityQuery,
        source: DatasetContext,
        candidate: DatasetContext,
        relation: LineageRelation | None,
        status_of: StatusOf,
        config: SimilarityConfig,
    ) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals over the checked fields, read for NULLs: a key is never NULL,
        and a field that is not a key may still be one that must be filled, so it costs nothing.
        The sample key must exist too (its values identify the sampled rows) but scores nothing."""
        control = query.control
        checked = control.checked_fields if isinstance(control, NotNullControl) else []
        sample_key = [name for name in control.dataset_fields() if name not in checked]
        matches = matched_fields(source_fields(source, checked), candidate, config)
        try:
            key_matches = matched_fields(source_fields(source, sample_key), candidate, config)
        except Excluded as excluded:
            raise Excluded(f"{excluded}, the key that identifies sampled rows") from None
        mapping = {
            m.source.name: m.target.name
            for m in [*matches, *key_matches]
            if m.source.name != m.target.name
        }
        signals = []
        for signal in schema_signals(source, candidate, matches, relation, config):
            if signal.name == "not_a_key":
                continue
            if signal.name == "key_match":
                reason = "the same field(s) are a key here too: a key is never NULL"
                signal = signal.model_copy(update={"reason": reason})
            signals.append(signal)
        return signals, mapping


def _first(values: Iterable[exp.Expression]) -> list[exp.Ordered]:
    """Ascending, NULLs last, in every dialect (each one's default differs)."""
    return [exp.Ordered(this=value.copy(), nulls_first=False) for value in values]


def _names(text: IncidentText, field: str) -> bool:
    """Whether the incident's words name ``field`` as a whole word."""
    word = re.compile(rf"(?<!\w){re.escape(field)}(?!\w)", re.IGNORECASE)
    return any(word.search(value) for value in text.fields().values())


def _not_null_spec(checked: list[str], keys: list[str]) -> dict[str, Any]:
    """A ``not_null`` spec on ``checked``, its samples identified by the declared key if any."""
    spec: dict[str, Any] = {"type": "not_null"}
    spec.update({"field": checked[0]} if len(checked) == 1 else {"fields": checked})
    if keys and keys != checked:
        spec["key"] = keys
    return spec
