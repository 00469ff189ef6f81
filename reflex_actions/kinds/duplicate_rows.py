"""Duplicate rows from non-idempotent retries: a key that must stay unique (``uniqueness``).

Words: duplicates, rows inserted twice, retries. Evidence: a field unique in every normal
snapshot of the history and duplicated in the incident's; else the dataset's declared key.
"""

from __future__ import annotations

import re

from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import discover_keys
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.vocabulary import display_name

DUPLICATE_ROWS = "duplicate_rows_non_idempotent_retry"

DUPLICATE_WORDS = re.compile(
    r"\b(duplicat\w*|twice|double[- ]?(?:count|insert|load)\w*|re-?insert\w*|"
    r"same (?:transaction|row|record)s?)\b",
    re.IGNORECASE,
)
RETRY_WORDS = re.compile(
    r"\b(retr(?:y|ies|ied|ying)|re-?ran|re-?run|idempoten\w*|timed? ?out)\b", re.IGNORECASE
)


class DuplicateRowsKind(LessonKind):
    pattern = DUPLICATE_ROWS
    title = "Duplicate rows from a non-idempotent retry"
    controls = (UniquenessControl,)
    triggers = frozenset({Trigger.LANDED_DATA})

    def words(self, text: IncidentText) -> list[Evidence]:
        duplicates = quotes(text, DUPLICATE_WORDS)
        return [*duplicates, *quotes(text, RETRY_WORDS)] if duplicates else []

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        retried = bool(quotes(text, RETRY_WORDS))
        evidence = unique(evidence)
        source = facts.source
        name = display_name(source.urn) if source else "the dataset"
        fields = list(source.fields) if source else []
        findings = discover_keys(facts.history, fields, text.urn) if facts.history else []
        cause = (
            "a non-idempotent retry re-inserted rows that were already loaded"
            if retried
            else "rows were loaded more than once"
        )
        if findings:
            key = findings[0]
            evidence.append(
                Evidence(
                    source="history",
                    quote=f"{key.field} is unique in all {key.normal_snapshots} normal "
                    f"snapshots and has {key.duplicate_rows} duplicate rows in "
                    f"{', '.join(key.failure_snapshots)}",
                )
            )
            return LessonDraft(
                failure_pattern=self.pattern,
                root_cause=f"Duplicate rows in {name}: {cause}, "
                f"breaking the uniqueness of {key.field}.",
                evidence=evidence,
                control={"type": "uniqueness", "field": key.field},
                confidence=0.9 if retried else 0.8,
                rationale=f"{key.field} behaves as a key in the history and is the field "
                "the incident duplicated.",
            )
        keys = [f.name for f in fields if f.is_key]
        if keys:
            evidence.append(
                Evidence(source="catalog", quote=f"{name} declares the key ({', '.join(keys)})")
            )
        control = None
        if len(keys) == 1:
            control = {"type": "uniqueness", "field": keys[0]}
        elif keys:
            control = {"type": "uniqueness", "fields": keys}
        return LessonDraft(
            failure_pattern=self.pattern,
            root_cause=f"Duplicate rows in {name}: {cause}.",
            evidence=evidence,
            control=control,
            confidence=0.6 if control else 0.3,
            rationale="No history shows which field was duplicated; the declared key is proposed."
            if control
            else "No history and no declared key: a steward must name the key.",
        )
