"""Reading an incident's words: verbatim sentences as evidence, for the kinds' text rules."""

from __future__ import annotations

import re

from reflex_actions.lessons.model import Evidence, IncidentText

#: a sentence ends at ., ! or ? followed by whitespace (so "finance.payments" stays whole)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def quotes(text: IncidentText, pattern: re.Pattern[str]) -> list[Evidence]:
    """The sentences of the incident that match ``pattern``, verbatim, each once per field."""
    evidence: list[Evidence] = []
    for source, value in text.fields().items():
        for sentence in _SENTENCE_BREAK.split(value):
            quote = sentence.strip()
            if quote and pattern.search(quote):
                evidence.append(Evidence(source=source, quote=quote))  # type: ignore[arg-type]
    return evidence


def unique(evidence: list[Evidence]) -> list[Evidence]:
    """Each (source, quote) once, in first-seen order."""
    return list({(e.source, e.quote): e for e in evidence}.values())
