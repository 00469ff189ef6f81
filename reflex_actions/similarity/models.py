"""What the resolver takes and returns. Every score is a sum of named, explained signals."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import Control
from reflex_actions.vocabulary import display_name


class CatalogReader(Protocol):
    """The part of the catalog interface the resolver reads (indexed or server-side lookups)."""

    def dataset(self, urn: str) -> DatasetContext | None: ...
    def downstreams(self, urn: str) -> list[str]: ...
    def user_status(self, urn: str) -> str | None: ...
    def datasets_by_domain(self, domain_urn: str) -> list[str]: ...
    def datasets_by_field(self, field_name: str) -> list[str]: ...
    def datasets_by_owner(self, owner_urn: str) -> list[str]: ...


class SimilarityQuery(BaseModel):
    """A lesson's view for the resolver: where it happened, what failed, the control."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    pattern: str
    control: Control
    source_urn: str
    #: the lesson's glossary term, to recognise assets it already covers
    lesson_urn: str | None = None
    #: users whose departure caused the incident (ownership pattern)
    departed_users: tuple[str, ...] = ()


class Signal(BaseModel):
    name: str
    contribution: float
    reason: str


class Excluded(Exception):
    """The candidate is ruled out; the message says why."""


def shared_domain(source: DatasetContext, candidate: DatasetContext, weight: float) -> list[Signal]:
    """The shared-domain signal, used by every pattern's signal set (empty when not shared)."""
    if not source.domain or candidate.domain != source.domain:
        return []
    reason = f"shares domain {display_name(source.domain)}"
    return [Signal(name="shared_domain", contribution=weight, reason=reason)]


class Candidate(BaseModel):
    urn: str
    name: str
    score: float
    recommended: bool
    signals: list[Signal]
    #: control field -> this dataset's field, when it names them differently
    field_mapping: dict[str, str] = {}

    @property
    def explanation(self) -> str:
        return "; ".join(s.reason for s in self.signals)


class Exclusion(BaseModel):
    urn: str
    name: str
    reason: str


class Resolution(BaseModel):
    source_urn: str
    pattern: str
    threshold: float
    #: scored candidates, best first; those at or above the threshold are recommended
    candidates: list[Candidate]
    #: assets that came close but were ruled out, each with the reason
    excluded: list[Exclusion]

    @property
    def recommended(self) -> list[Candidate]:
        return [c for c in self.candidates if c.recommended]
