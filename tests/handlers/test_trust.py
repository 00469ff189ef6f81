"""Reflex believes only what DataHub authenticated, what Reflex wrote, and its own clock
(DESIGN §9): each test is a forged or unauthenticated write that must not pass."""

from __future__ import annotations

from dataclasses import replace

from datahub.metadata.schema_classes import AuditStampClass, OwnerClass, OwnershipClass

from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.context import UNAUTHENTICATED, HandlerContext
from reflex_actions.handlers.directives import SaveLesson, SetProperties
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.lessons.model import LessonState
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.vocabulary import APPROVAL
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    INTRUDER,
    LESSON,
    PAYMENTS,
    STEWARD,
    add_dataset,
    approval,
    context,
    pending_lesson,
    seed,
)

ADMIN = "urn:li:corpuser:admin"


def _saved(ctx: HandlerContext) -> SaveLesson:
    (saved,) = [d for d in ctx.out.directives if isinstance(d, SaveLesson)]
    return saved


def test_without_authentication_an_approvers_decision_is_refused_and_reverted() -> None:
    """With metadata-service auth off, GMS records whatever actor a caller names: the
    approver's name on the event proves nothing, so the approval is refused, put back to
    PENDING, and the reason is on the lesson page."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    pending_lesson(catalog)
    ctx = context(catalog)
    ctx.actors_authenticated = False

    on_lesson_properties(replace(approval(STEWARD), authenticated=False), ctx)

    assert SetProperties(LESSON, {APPROVAL: ["PENDING"]}) in ctx.out.directives
    saved = _saved(ctx).lesson
    assert saved.state is LessonState.PENDING_APPROVAL
    assert saved.decisions[-1].decision == "approval refused"
    assert saved.decisions[-1].detail == UNAUTHENTICATED


def test_trusting_unauthenticated_actors_is_said_on_the_lesson_page() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    pending_lesson(catalog)
    ctx = context(catalog, trust_unauthenticated_actors=True)
    ctx.actors_authenticated = False

    on_lesson_properties(replace(approval(STEWARD), authenticated=False), ctx)

    saved = _saved(ctx).lesson
    assert saved.state is LessonState.PUBLISHED
    assert not saved.decisions[-1].authenticated
    page = render_definition(saved, "t")
    assert "Decisions not authenticated" in page
    assert "scope approved by urn:li:corpuser:alice" in page and "*not authenticated*" in page


def _owned_by(catalog: MemoryCatalog, owner: str, written_by: str) -> None:
    ownership = OwnershipClass(
        owners=[OwnerClass(owner=owner, type="BUSINESS_OWNER")],
        lastModified=AuditStampClass(time=0, actor=written_by),
    )
    seed(catalog, acting_as(written_by, LESSON, ownership))


def test_an_owner_who_wrote_himself_in_authorizes_nothing() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    pending_lesson(catalog)
    _owned_by(catalog, INTRUDER, written_by=INTRUDER)
    ctx = context(catalog)

    on_lesson_properties(approval(INTRUDER), ctx)

    saved = _saved(ctx).lesson
    assert saved.state is LessonState.PENDING_APPROVAL
    assert saved.decisions[-1].decision == "approval refused"
    assert "wrote that ownership themselves" in saved.decisions[-1].detail


def test_an_owner_an_admin_wrote_in_may_decide() -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    pending_lesson(catalog)
    _owned_by(catalog, INTRUDER, written_by=ADMIN)
    ctx = context(catalog)

    on_lesson_properties(approval(INTRUDER), ctx)

    assert _saved(ctx).lesson.state is LessonState.PUBLISHED
