"""The contract of a lesson kind (DESIGN §7): one module teaches Reflex one incident class.

A kind names its failure pattern, its control types, the words that recognise its incidents and
the evidence it drafts a control from, the similarity signals that find where else it can
happen, when its controls are evaluated, and which history its backtest runs on. The core asks
the registered kinds (``reflex_actions.kinds``) and names none of them.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol

from reflex_actions.backtest.history import LearningSplit
from reflex_actions.catalog.models import DatasetContext, OwnerInfo
from reflex_actions.controls import Control
from reflex_actions.controls.base import control_type_of
from reflex_actions.errors import ReflexError
from reflex_actions.lessons.facts import FactReader, IncidentFacts
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.lineage import Relation
from reflex_actions.similarity.models import CatalogReader, Signal, SimilarityQuery
from reflex_actions.similarity.schema_signals import matched_fields, schema_signals, source_fields
from reflex_actions.similarity.weighing import Weighing

#: a user urn -> its corpUserStatus.status, or None when unknown
StatusOf = Callable[[str], str | None]


class MetadataReader(Protocol):
    """The catalog reads a kind evaluated on metadata (not landed rows) may make."""

    def user_status(self, urn: str) -> str | None: ...
    def owners_of(self, urn: str) -> list[OwnerInfo]: ...
    def groups_of(self, user: str) -> list[str]: ...


@dataclass(frozen=True)
class OwnerChange:
    """A replacement owner a kind proposes after a failure, and why; a steward approves it."""

    owner: str
    ownership_type: str
    reason: str


class Trigger(str, Enum):
    """When a kind's controls are evaluated."""

    LANDED_DATA = "landed_data"  # an ``operation`` names a landed snapshot or partition
    USER_STATUS = "user_status"  # a user's ``corpUserStatus`` changed (e.g. SUSPENDED)
    ASPECT_CHANGE = "aspect_change"  # a metadata aspect of a covered dataset changed
    SCHEDULE = "schedule"  # on an interval: for failures that send no event (stale data)


class LessonKind(ABC):
    """One incident class, end to end. Subclass it, register it under the entry point group
    ``reflex_actions.kinds``, and prove it with the kind conformance suite."""

    #: stable id stored on every lesson of this kind (``duplicate_rows``, ...)
    pattern: ClassVar[str]
    title: ClassVar[str]
    #: the control types it proposes; the first is the one a draft uses by default
    controls: ClassVar[tuple[type[Control], ...]]
    triggers: ClassVar[frozenset[Trigger]] = frozenset({Trigger.LANDED_DATA})
    #: the folder (under ``histories.root``) of one estate-wide history its backtest runs on
    #: (e.g. ownership snapshots); None: each candidate is backtested on its own history
    estate_history: ClassVar[str | None] = None
    #: whether the schema signals weigh keys (a uniqueness lesson cares whether a field is a
    #: key; the values a field may hold, or what it references, do not depend on it)
    key_signals: ClassVar[bool] = True

    # --- drafting --------------------------------------------------------------------------------
    #: the words that recognise this kind's incidents (a kind sets it, or overrides ``words``)
    incident_words: ClassVar[re.Pattern[str] | None] = None

    def words(self, text: IncidentText) -> list[Evidence]:
        """Verbatim quotes of the incident that recognise this kind (empty: not this kind):
        those matching ``incident_words``. The kind with the most quotes drafts the lesson."""
        return quotes(text, self.incident_words) if self.incident_words is not None else []

    @abstractmethod
    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        """A draft from the words plus what the catalog and the history show."""

    def check_control(
        self, control: Control, source: DatasetContext | None, catalog: FactReader | None
    ) -> list[str]:
        """Problems with ``control`` beyond its fields existing in the source (empty when
        fine), e.g. that a dataset it references is in the catalog with a compatible field."""
        return []

    def control_types(self) -> tuple[str, ...]:
        return tuple(control_type_of(control) for control in self.controls)

    def llm_shape(self) -> dict[str, Any]:
        """What a model may propose for this kind, derived from the control models, so the
        prompt and the validation cannot disagree."""
        return {
            "failure_pattern": self.pattern,
            "title": self.title,
            "controls": {control_type_of(c): c.model_json_schema() for c in self.controls},
        }

    # --- similar assets --------------------------------------------------------------------------
    def follows_lineage(self) -> bool:
        """Whether lineage relatives are candidates (data flows; ownership does not)."""
        return True

    def candidate_lookups(
        self, query: SimilarityQuery, source: DatasetContext, catalog: CatalogReader
    ) -> list[list[str]]:
        """Indexed lookups beyond the control's field names and the source's domain."""
        return []

    def related_through(
        self, query: SimilarityQuery, source: DatasetContext, catalog: CatalogReader
    ) -> dict[str, Relation]:
        """Lineage relations beyond the source's own relatives that make a dataset a candidate
        (urn -> how it is related), e.g. datasets downstream of a parent the control references.
        They count as found and take precedence over the source's relation in ``signals``."""
        return {}

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        """The named, weighted signals for one candidate and its field mapping (source field ->
        candidate field); raise ``Excluded`` to rule it out with a reason. By default, the
        schema signals: same fields with compatible types, keys, lineage, domain, platform."""
        source, candidate, config = seen.source, seen.candidate, seen.config
        matches = matched_fields(
            source_fields(source, seen.query.control.dataset_fields()), candidate, config
        )
        mapping = {m.source.name: m.target.name for m in matches if m.source.name != m.target.name}
        signals = schema_signals(
            source, candidate, matches, seen.relation, config, self.key_signals
        )
        return signals, mapping

    def not_yet_covered_weight(self, config: SimilarityConfig) -> float:
        return config.schema_weights.not_yet_covered

    # --- evaluation on a user's status (Trigger.USER_STATUS) -------------------------------------
    def rows_on_user_status(
        self, control: Control, dataset: DatasetContext, reader: MetadataReader
    ) -> list[dict[str, Any]]:
        """The rows its control is run on for ``dataset`` when an owner's status changes."""
        raise ReflexError(f"lesson kind {self.pattern} is not evaluated on a user's status")

    def owner_change(
        self, control: Control, dataset: DatasetContext, departed: str, reader: MetadataReader
    ) -> OwnerChange | None:
        """A replacement owner to propose when its control fails on a departure, if any."""
        return None


@dataclass(frozen=True)
class LearnedFinding:
    """A control whose parameters a kind learned from the earlier part of a source's history
    (no peeking), the fact of the history that shows it, and what it learned from."""

    control: dict[str, Any]
    fact: str
    learned_from: LearningSplit


def learned_draft(
    pattern: str,
    evidence: list[Evidence],
    finding: LearnedFinding | None,
    found: tuple[str, str],
    not_found: tuple[str, str],
) -> LessonDraft:
    """The draft of a kind that learns its control from the history: with the finding, its
    control and the history's fact as evidence; without, no control and a steward's task.
    ``found`` and ``not_found`` are each (root cause, rationale)."""
    if finding is None:
        root_cause, rationale = not_found
        return LessonDraft(
            failure_pattern=pattern,
            root_cause=root_cause,
            evidence=evidence,
            control=None,
            confidence=0.3,
            rationale=rationale,
        )
    root_cause, rationale = found
    return LessonDraft(
        failure_pattern=pattern,
        root_cause=root_cause,
        evidence=[*evidence, Evidence(source="history", quote=finding.fact)],
        control=finding.control,
        confidence=0.8,
        rationale=rationale,
        learned_from=finding.learned_from,
    )
