"""The default proposer: the registered kinds' text rules plus catalog and history facts.

No model needed. A kind whose words match the incident drafts the lesson; when the words fit
several kinds, the evidence decides (a control backed by the catalog or the history; among
several, the most quoted), and when nothing settles it the lesson is ``unknown`` and names the
candidate kinds for the steward.
"""

from __future__ import annotations

from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText, LessonDraft, ProposerInfo
from reflex_actions.patterns import UNKNOWN_PATTERN
from reflex_actions.registry import registered_kinds


class DeterministicProposer:
    def propose(self, text: IncidentText, facts: IncidentFacts) -> tuple[LessonDraft, ProposerInfo]:
        return self.draft(text, facts), ProposerInfo(name="deterministic")

    def draft(self, text: IncidentText, facts: IncidentFacts) -> LessonDraft:
        matched = [(kind, words) for kind in registered_kinds() if (words := kind.words(text))]
        if not matched:
            return _unknown(
                text, "The incident's words match no pattern Reflex can turn into a control."
            )
        drafts = [
            (len(words), kind.draft(text, facts.for_kind(kind.pattern), words))
            for kind, words in matched
        ]
        if len(drafts) == 1:
            return drafts[0][1]
        # The words fit several kinds: the evidence decides (a control backed by what the
        # catalog or the history shows); words alone decide nothing.
        backed = [(count, d) for count, d in drafts if d.control is not None and _backed(d)]
        if backed:
            return max(backed, key=lambda item: item[0])[1]  # ties: the first by pattern id
        kinds = ", ".join(kind.pattern for kind, _ in matched)
        return _unknown(
            text,
            f"The incident's words fit several kinds ({kinds}) and nothing in the catalog or "
            "the history settles which: set reflex.controlSpec to the control that fits.",
        )


def _backed(draft: LessonDraft) -> bool:
    return any(item.source in ("catalog", "history") for item in draft.evidence)


def _unknown(text: IncidentText, rationale: str) -> LessonDraft:
    return LessonDraft(
        failure_pattern=UNKNOWN_PATTERN,
        root_cause=text.resolution_note or text.title or "Unknown root cause.",
        confidence=0.1,
        rationale=rationale,
    )
