"""What every handler gets: the catalog, the configuration, and derived helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from datahub.metadata.schema_classes import AssertionInfoClass, StatusClass

from reflex_actions.catalog.base import Catalog
from reflex_actions.config import ReflexConfig
from reflex_actions.engines.base import Engine
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.authorization import Gatekeeper
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.directives import Outbox, apply
from reflex_actions.handlers.histories import Histories
from reflex_actions.handlers.lesson_store import load_lesson, structured_values
from reflex_actions.handlers.own_runs import OwnRuns
from reflex_actions.lessons.drafting import Proposer, make_proposer
from reflex_actions.lessons.model import Lesson
from reflex_actions.times import now_ms
from reflex_actions.vocabulary import COVERAGE


@dataclass
class HandlerContext:
    catalog: Catalog
    config: ReflexConfig
    clock: Callable[[], int] = now_ms
    #: the reasons of the decisions refused while handling the current event (for the report)
    refusals: list[str] = field(default_factory=list)
    #: what the current event's decision will write (applied once the handler returns)
    out: Outbox = field(default_factory=Outbox)
    #: the engines opened for the platforms configured under ``engines`` (by their index
    #: there), kept open for the action's lifetime
    engines: dict[int, Engine] = field(default_factory=dict, repr=False)
    #: whether the store authenticates whoever writes to it, so that the actor it records is
    #: the one who wrote (the embedded store's file permissions are its boundary; a DataHub
    #: server with metadata-service authentication off authenticates no one)
    actors_authenticated: bool = True
    #: the key Reflex seals its run events with where the store keeps no writer for them
    run_seal_key: bytes | None = field(default=None, repr=False)

    @cached_property
    def proposer(self) -> Proposer:
        return make_proposer(self.config.llm)

    @cached_property
    def runs(self) -> OwnRuns:
        """The run events Reflex wrote: the only ones it reads to decide."""
        return OwnRuns(self.catalog, self.gate.is_own, self.run_seal_key)

    @property
    def histories(self) -> Histories:
        """Where each dataset's history and table are; the engines it opens stay open."""
        return Histories(self.catalog, self.config, self.engines)

    @property
    def gate(self) -> Gatekeeper:
        """Who may pass a human gate of a lesson."""
        return Gatekeeper(self.catalog, self.config, self.actors_authenticated)

    def lesson(self, urn: str) -> Lesson | None:
        """The lesson on this term as the current decision sees it: its own pending save, else
        the store's."""
        return self.out.pending_lesson(urn) or load_lesson(self.catalog, urn)

    def published_lessons(self, dataset_urn: str, as_of: int | None = None) -> list[Lesson]:
        """The published lessons whose controls cover this dataset (as the current decision
        sees them); with ``as_of`` (an event's time), only those in force by then: an event is
        judged by the coverage at its own time, so replaying an old event never runs a
        control published after it."""
        lessons = []
        for urn in structured_values(self.catalog, dataset_urn, COVERAGE):
            lesson = self.lesson(str(urn))
            if (
                lesson
                and (lesson.in_force_on(dataset_urn) or self.published_by_rule(lesson, dataset_urn))
                and (as_of is None or (lesson.in_force_since or 0) <= as_of)
            ):
                lessons.append(lesson)
        return lessons

    def published_by_rule(self, lesson: Lesson, dataset_urn: str) -> bool:
        """Whether a lesson whose scope is a rule runs on this dataset: its record does not
        list a rule's datasets, so the store says, by Reflex's own assertion of the lesson
        there (written by Reflex, not withdrawn); a coverage anyone wrote proves nothing."""
        if lesson.scope_rule is None:
            return False
        assertion = assertion_urn(lesson.urn, dataset_urn)
        if not self.gate.is_own(self.catalog.aspect_writer(assertion, AssertionInfoClass)):
            return False
        status = self.catalog.get_aspect(assertion, StatusClass)
        return status is None or not status.removed


def decide_and_apply(
    handler: Callable[[AspectChange, HandlerContext], None],
    change: AspectChange,
    ctx: HandlerContext,
) -> None:
    """What the router does with one event: the handler decides (reads, records directives),
    then the applier writes the whole decision; a failed decision writes nothing."""
    decide_then_apply(ctx, lambda: handler(change, ctx))


def decide_then_apply(ctx: HandlerContext, decide: Callable[[], None]) -> None:
    """One decision, then its writes as one: ``decide`` reads and records directives."""
    ctx.out = Outbox()
    ctx.refusals.clear()
    decide()
    decided, ctx.out = ctx.out, Outbox()  # nothing of this decision lingers for the next
    apply(decided.directives, ctx.catalog, ctx.config.service_actor)
