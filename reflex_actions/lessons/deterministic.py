"""The default proposer: rules over the incident's words plus catalog and history facts.

No model needed. Its evidence is verbatim quotes and facts; its confidence says how much of the
draft rests on data (a key found in the history) rather than on words alone.
"""

from __future__ import annotations

import re

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import discover_keys
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft, ProposerInfo
from reflex_actions.patterns import FailurePattern
from reflex_actions.vocabulary import display_name

DUPLICATE_WORDS = re.compile(
    r"\b(duplicat\w*|twice|double[- ]?(?:count|insert|load)\w*|re-?insert\w*|"
    r"same (?:transaction|row|record)s?)\b",
    re.IGNORECASE,
)
RETRY_WORDS = re.compile(
    r"\b(retr(?:y|ies|ied|ying)|re-?ran|re-?run|idempoten\w*|timed? ?out)\b", re.IGNORECASE
)
OWNERSHIP_WORDS = re.compile(
    r"\b(owner(?:ship|s)?|left the company|leaver|offboard\w*|suspended|orphan\w*|"
    r"nobody to (?:page|approve|contact))\b",
    re.IGNORECASE,
)
OWNER_TYPE_WORDS = {
    "TECHNICAL_OWNER": re.compile(r"technical owner", re.IGNORECASE),
    "DATA_STEWARD": re.compile(r"steward", re.IGNORECASE),
    "BUSINESS_OWNER": re.compile(r"business owner", re.IGNORECASE),
}
_USER_MENTION = re.compile(r"urn:li:corpuser:[\w.@-]+|\b[a-z][a-z0-9._-]{1,30}\b")
#: how many words of the incident are looked up as possible user names, at most
MAX_USER_LOOKUPS = 40


#: a sentence ends at ., ! or ? followed by whitespace (so "finance.payments" stays whole)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def _quotes(text: IncidentText, pattern: re.Pattern[str]) -> list[Evidence]:
    """The sentences of the incident that match ``pattern``, verbatim, each once."""
    evidence: list[Evidence] = []
    for source, value in text.fields().items():
        for sentence in _SENTENCE_BREAK.split(value):
            quote = sentence.strip()
            if quote and pattern.search(quote):
                evidence.append(Evidence(source=source, quote=quote))  # type: ignore[arg-type]
    return evidence


def _unique(evidence: list[Evidence]) -> list[Evidence]:
    return list({(e.source, e.quote): e for e in evidence}.values())


class DeterministicProposer:
    def propose(self, text: IncidentText, facts: IncidentFacts) -> tuple[LessonDraft, ProposerInfo]:
        return self.draft(text, facts), ProposerInfo(name="deterministic")

    def draft(self, text: IncidentText, facts: IncidentFacts) -> LessonDraft:
        duplicates, retries = _quotes(text, DUPLICATE_WORDS), _quotes(text, RETRY_WORDS)
        ownership = _quotes(text, OWNERSHIP_WORDS)
        if duplicates and len(duplicates) + len(retries) >= len(ownership):
            return self._duplicates(text, facts, _unique(duplicates + retries), bool(retries))
        if ownership:
            return self._ownership(text, facts, ownership)
        return LessonDraft(
            failure_pattern=FailurePattern.UNKNOWN,
            root_cause=text.resolution_note or text.title or "Unknown root cause.",
            confidence=0.1,
            rationale="The incident's words match no pattern Reflex can turn into a control.",
        )

    def _duplicates(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence], retried: bool
    ) -> LessonDraft:
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
                failure_pattern=FailurePattern.DUPLICATE_ROWS_NON_IDEMPOTENT_RETRY,
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
            failure_pattern=FailurePattern.DUPLICATE_ROWS_NON_IDEMPOTENT_RETRY,
            root_cause=f"Duplicate rows in {name}: {cause}.",
            evidence=evidence,
            control=control,
            confidence=0.6 if control else 0.3,
            rationale="No history shows which field was duplicated; the declared key is proposed."
            if control
            else "No history and no declared key: a steward must name the key.",
        )

    def _ownership(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        departed = _departed_users(text, facts.source, facts)
        for user in departed:
            evidence.append(Evidence(source="catalog", quote=f"{user} is SUSPENDED"))
        joined = " ".join(text.fields().values())
        owner_types = [t for t, pattern in OWNER_TYPE_WORDS.items() if pattern.search(joined)] or [
            "TECHNICAL_OWNER"
        ]
        name = display_name(facts.source.urn) if facts.source else "the dataset"
        who = ", ".join(display_name(u) for u in departed) or "an owner"
        return LessonDraft(
            failure_pattern=FailurePattern.ORPHANED_OWNERSHIP,
            root_cause=f"{name} was orphaned when {who} left: it depended on a single active "
            f"{'/'.join(owner_types).lower().replace('_', ' ')}.",
            evidence=evidence,
            control={
                "type": "active_ownership",
                "min_active_owners": 1,
                "owner_types": owner_types,
            },
            confidence=0.85 if departed else 0.5,
            departed_users=departed,
            rationale="A departed user was the dataset's only owner of that type."
            if departed
            else "The incident describes lost ownership; no suspended user was identified.",
        )


def _departed_users(
    text: IncidentText, source: DatasetContext | None, facts: IncidentFacts
) -> list[str]:
    """Suspended users among the source's owners and the users the incident names."""
    mentioned: dict[str, None] = {}
    for match in _USER_MENTION.finditer(" ".join(text.fields().values())):
        token = match.group(0)
        mentioned[token if token.startswith("urn:li:") else f"urn:li:corpuser:{token}"] = None
    owners = [o.owner for o in source.owners] if source else []
    looked_up = list(dict.fromkeys([*owners, *list(mentioned)[:MAX_USER_LOOKUPS]]))
    return [user for user in looked_up if facts.catalog.user_status(user) == "SUSPENDED"]
