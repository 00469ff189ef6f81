"""Human gate 2: only an authorized actor's approval publishes anything."""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import AssertionInfoClass

from reflex_actions.config import ReflexConfig
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import INTRUDER, STEWARD, Demo
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import APPROVAL, COVERAGE, SCOPE
from tests.loop.store import all_rows, latest, store_of, stored_lesson, urns_with

PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
SERVICE_ACTOR = ReflexConfig().service_actor


def _published_anything(demo: Demo) -> bool:
    store = store_of(demo.workdir)
    coverage = [
        row for row in all_rows(store) if row[1] == "structuredProperties" and COVERAGE in row[3]
    ]
    return bool(coverage or urns_with(store, AssertionInfoClass.ASPECT_NAME))


@pytest.mark.parametrize("actor", [INTRUDER, SERVICE_ACTOR], ids=["non-approver", "reflex"])
def test_an_unauthorized_approval_publishes_nothing(pending: Demo, actor: str) -> None:
    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED", actor=actor)

    assert not _published_anything(pending)
    lesson = stored_lesson(store_of(pending.workdir), PAYMENTS_LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.published_scope == []
    assert "scope approved" not in {d.decision for d in lesson.decisions}

    # the same stage does publish once the steward approves: the refusal above was the gate
    pending.catalog.set_structured_properties(PAYMENTS_LESSON, {APPROVAL: ["PENDING"]}, STEWARD)
    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED", actor=STEWARD)
    assert _published_anything(pending)
    assert pending.lesson(PAYMENTS_INCIDENT).state is LessonState.PUBLISHED


def test_the_scope_the_steward_edited_is_the_one_published(pending: Demo) -> None:
    """The steward drops two recommended datasets and adds a near miss before approving."""
    payments, ledger, refunds = (
        dataset_urn(name)
        for name in ("finance.payments", "finance.ledger_entries", "finance.refunds")
    )
    pending.catalog.set_structured_properties(
        PAYMENTS_LESSON, {SCOPE: [payments, ledger, refunds]}, STEWARD
    )
    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED", actor=STEWARD)

    store = store_of(pending.workdir)
    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.published_scope == [payments, ledger, refunds]
    asserted = {
        latest(store, urn, AssertionInfoClass).customAssertion.entity  # type: ignore[union-attr]
        for urn in urns_with(store, AssertionInfoClass.ASPECT_NAME)
    }
    assert asserted == {payments, ledger, refunds}
    for urn in (payments, ledger, refunds):
        covered = pending.catalog.dataset(urn)
        assert covered is not None
        assert PAYMENTS_LESSON in covered.structured_properties[COVERAGE]
    card = pending.catalog.dataset(dataset_urn("finance.card_settlements"))
    assert card is not None and COVERAGE not in card.structured_properties
