"""The default proposer: the registered kinds' text rules plus catalog and history facts.

No model needed. The kind whose words match the incident most drafts the lesson (ties go to
the kind first by pattern id); its evidence is verbatim quotes and facts, and its confidence
says how much of the draft rests on data rather than on words alone.
"""

from __future__ import annotations

from reflex_actions.kinds import registered_kinds
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText, LessonDraft, ProposerInfo
from reflex_actions.patterns import UNKNOWN_PATTERN


class DeterministicProposer:
    def propose(self, text: IncidentText, facts: IncidentFacts) -> tuple[LessonDraft, ProposerInfo]:
        return self.draft(text, facts), ProposerInfo(name="deterministic")

    def draft(self, text: IncidentText, facts: IncidentFacts) -> LessonDraft:
        best, evidence = None, []
        for kind in registered_kinds():
            words = kind.words(text)
            if words and len(words) > len(evidence):
                best, evidence = kind, words
        if best is not None:
            return best.draft(text, facts, evidence)
        return LessonDraft(
            failure_pattern=UNKNOWN_PATTERN,
            root_cause=text.resolution_note or text.title or "Unknown root cause.",
            confidence=0.1,
            rationale="The incident's words match no pattern Reflex can turn into a control.",
        )
