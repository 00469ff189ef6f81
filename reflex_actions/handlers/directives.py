"""Handlers decide, the applier writes: a handler reads the catalog and records what to write as
typed directives (the shape of datahub-actions' propagation directives); nothing reaches the
store until the whole decision is made, and then one applier writes it, in order.

A decision that fails leaves no half-written trace: its directives are dropped. Order carries
meaning (a lesson's term info after its properties, a run event after its incident), so the
applier keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from datahub.emitter.mcp import MetadataChangeProposalWrapper

from reflex_actions.catalog.base import Catalog
from reflex_actions.handlers.lesson_store import save_lesson
from reflex_actions.lessons.model import Lesson


@dataclass(frozen=True)
class Emit:
    """Write these aspects (an unchanged aspect is not rewritten)."""

    mcps: tuple[MetadataChangeProposalWrapper, ...]


@dataclass(frozen=True)
class SetProperties:
    """Set these structured properties on ``urn``, keeping its others (an atomic merge)."""

    urn: str
    values: Mapping[str, Sequence[str | float]]


@dataclass(frozen=True)
class AddOwner:
    urn: str
    owner: str
    ownership_type: str


@dataclass(frozen=True)
class SaveLesson:
    """Rewrite the lesson's term (page and machine state) as it was when decided."""

    lesson: Lesson


Directive = Emit | SetProperties | AddOwner | SaveLesson


@dataclass
class Outbox:
    """The directives one event's decision produced so far."""

    directives: list[Directive] = field(default_factory=list)

    def emit(self, *mcps: MetadataChangeProposalWrapper) -> None:
        self.directives.append(Emit(tuple(mcps)))

    def set_properties(self, urn: str, values: Mapping[str, Sequence[str | float]]) -> None:
        self.directives.append(SetProperties(urn, dict(values)))

    def add_owner(self, urn: str, owner: str, ownership_type: str) -> None:
        self.directives.append(AddOwner(urn, owner, ownership_type))

    def save_lesson(self, lesson: Lesson) -> None:
        self.directives.append(SaveLesson(lesson.model_copy(deep=True)))

    def pending_lesson(self, urn: str) -> Lesson | None:
        """The lesson as this decision last decided to save it, if it did: a decision reads
        its own writes (one event may touch a lesson once per dataset)."""
        saved = [
            d.lesson for d in self.directives if isinstance(d, SaveLesson) and d.lesson.urn == urn
        ]
        return saved[-1].model_copy(deep=True) if saved else None

    def mark(self) -> int:
        return len(self.directives)

    def rollback(self, mark: int) -> None:
        """Drop what was decided since ``mark`` (a part of the decision that failed)."""
        del self.directives[mark:]


def apply(directives: Sequence[Directive], catalog: Catalog, actor: str) -> None:
    """Write a decision, in order, as ``actor``: as one, where the store can (one transaction
    on the embedded store: a decision that fails to write leaves nothing of it)."""
    if not directives:
        return  # nothing to write: no lock, no transaction
    with catalog.one_decision():
        _apply(directives, catalog, actor)


def _apply(directives: Sequence[Directive], catalog: Catalog, actor: str) -> None:
    for directive in directives:
        match directive:
            case Emit(mcps):
                catalog.emit(list(mcps))
            case SetProperties(urn, values):
                catalog.set_structured_properties(urn, values, actor)
            case AddOwner(urn, owner, ownership_type):
                catalog.add_owner(urn, owner, ownership_type, actor)
            case SaveLesson(lesson):
                save_lesson(catalog, lesson, actor)
