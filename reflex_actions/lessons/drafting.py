"""Drafting a lesson from a resolved incident with the configured proposer."""

from __future__ import annotations

from typing import Protocol

from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.llm import LlmConfig, LlmProposer
from reflex_actions.lessons.model import IncidentText, Lesson, LessonDraft, ProposerInfo
from reflex_actions.lessons.validation import check_draft


class Proposer(Protocol):
    def propose(
        self, text: IncidentText, facts: IncidentFacts
    ) -> tuple[LessonDraft, ProposerInfo]: ...


def make_proposer(llm: LlmConfig | None) -> Proposer:
    """The LLM proposer when a model is configured, else the deterministic one."""
    return LlmProposer(llm) if llm is not None else DeterministicProposer()


def draft_lesson(
    lesson_urn: str, text: IncidentText, facts: IncidentFacts, proposer: Proposer
) -> Lesson:
    draft, info = proposer.propose(text, facts)
    problems = check_draft(draft, text, facts.source, facts.catalog)
    return Lesson(
        urn=lesson_urn,
        incident=text.urn,
        source_dataset=facts.source.urn if facts.source else None,
        affected_assets=list(text.affected_assets),
        failure_pattern=draft.failure_pattern,
        root_cause=draft.root_cause,
        evidence=draft.evidence,
        control=draft.control,
        confidence=draft.confidence,
        rationale=draft.rationale,
        proposer=info,
        validation_error="; ".join(problems) or None,
        # a proposer's word is not enough: only users the catalog shows as suspended count
        departed_users=[
            user
            for user in dict.fromkeys(draft.departed_users)
            if facts.catalog.user_status(user) == "SUSPENDED"
        ],
        # only Reflex's own reading of the history says what was learned from it: a model
        # reads none, so its control's figures are all held out
        learned_from=draft.learned_from if info.name == "deterministic" else None,
    )
