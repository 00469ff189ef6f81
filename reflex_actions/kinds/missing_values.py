"""Missing values: a field that must be filled arrived NULL (``not_null``).

Words: null, missing value, empty or blank field. "Missing rows" and "empty table" are volume
incidents, not this one. Evidence: a field with no NULL in every normal snapshot of the history
and NULLs in the incident's labelled snapshot(s); else a declared key field the incident names;
else a draft without a control that a steward completes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import FieldInfo
from reflex_actions.controls.not_null import NotNullControl
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import fields_broken_in_failures
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import unique
from reflex_actions.similarity.models import Excluded, Signal
from reflex_actions.similarity.schema_signals import matched_fields, schema_signals, source_fields
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.vocabulary import display_name

MISSING_VALUES = "missing_values"

NULL_WORDS = re.compile(
    r"\b(null(?:s|ed)?|null values?|missing values?|unpopulated|not populated|"
    r"(?:empty|blank) (?:values?|fields?|columns?|strings?|cells?)|blanks?|left blank)\b",
    re.IGNORECASE,
)


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
    incident_words = NULL_WORDS
    controls = (NotNullControl,)
    triggers = frozenset({Trigger.LANDED_DATA})

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

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals over the checked fields, read for NULLs: a key is never NULL,
        and a field that is not a key may still be one that must be filled, so it costs nothing.
        The sample key must exist too (its values identify the sampled rows) but scores nothing."""
        source, candidate, config = seen.source, seen.candidate, seen.config
        control = seen.query.control
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
        for signal in schema_signals(source, candidate, matches, seen.relation, config):
            if signal.name == "not_a_key":
                continue
            if signal.name == "key_match":
                reason = "the same field(s) are a key here too: a key is never NULL"
                signal = signal.model_copy(update={"reason": reason})
            signals.append(signal)
        return signals, mapping


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
