"""Reflex judges every event by the state at the event's time and never learns from itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    CorpUserStatusClass,
    GlossaryTermInfoClass,
    IncidentInfoClass,
    IncidentStateClass,
    OperationClass,
    OperationTypeClass,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.demo.history import OWNERSHIP_INCIDENT
from reflex_actions.demo.run import HR_ADMIN, OWNERSHIP_NOTE, SCENARIOS, Demo
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.loop.store import (
    all_rows,
    incidents_b,
    latest,
    replay_from_start,
    store_of,
    stored_lesson,
    urns_with,
)
from tests.stages import FullLoop, demo_with_resolved

OWNERSHIP_LESSON = lesson_urn_for(OWNERSHIP_INCIDENT)
FX_RATES = dataset_urn("finance.fx_rates")  # erin is its only owner
ERIN = user_urn("erin")


def test_reflex_never_drafts_a_lesson_from_its_own_incident(full_loop: FullLoop) -> None:
    """In the demo, approving the owner change resolves Reflex's incident B: that resolution is
    noted on the lesson that raised B, and no lesson is drafted from it."""
    store = store_of(full_loop.workdir)
    lesson = stored_lesson(store, OWNERSHIP_LESSON)
    resolved = [r for r in lesson.recurrences if r.resolved]
    assert resolved, "the demo resolves its ownership incidents B"
    for recurrence in resolved:
        info = latest(store, recurrence.incident, IncidentInfoClass)
        assert info is not None and info.status.state == IncidentStateClass.RESOLVED
        assert recurrence.resolved.note == info.status.message
        assert lesson_urn_for(recurrence.incident) not in urns_with(
            store, GlossaryTermInfoClass.ASPECT_NAME
        )
    info = latest(store, OWNERSHIP_LESSON, GlossaryTermInfoClass)
    assert info is not None and "resolved by" in info.definition
    lesson_terms = [u for u in urns_with(store, "glossaryTermInfo") if "reflex.lesson." in u]
    assert len(lesson_terms) == len(SCENARIOS)  # one per incident A


@pytest.fixture
def suspended_before_coverage(tmp_path: Path) -> Iterator[Demo]:
    """Erin leaves while the ownership lesson waits for approval; it is approved afterwards,
    covering fx_rates, which only erin owned."""
    demo = demo_with_resolved(tmp_path / "demo", OWNERSHIP_INCIDENT, OWNERSHIP_NOTE)
    try:
        demo.steward_sets(OWNERSHIP_LESSON, ROOT_CAUSE_STATUS, "CONFIRMED")
        status = CorpUserStatusClass("SUSPENDED", AuditStampClass(demo.tick(), HR_ADMIN))
        demo.catalog.emit([acting_as(HR_ADMIN, ERIN, status)])
        demo.react()
        demo.steward_sets(OWNERSHIP_LESSON, APPROVAL, "APPROVED")
        lesson = stored_lesson(store_of(demo.workdir), OWNERSHIP_LESSON)
        assert lesson.state is LessonState.PUBLISHED and FX_RATES in lesson.published_scope
        yield demo
    finally:
        demo.catalog.close()


def test_a_replayed_suspension_is_judged_by_the_coverage_at_its_time(
    suspended_before_coverage: Demo,
) -> None:
    """When erin left, fx_rates was not covered: replaying the log from the start must not run
    the control nor raise an incident for her departure now that it is."""
    demo = suspended_before_coverage
    store = store_of(demo.workdir)
    assert not incidents_b(store, FX_RATES)
    before = all_rows(store)

    replay_from_start(demo)

    assert not incidents_b(store, FX_RATES)
    assert all_rows(store) == before


def test_a_usage_operation_naming_no_data_is_skipped(published: Demo) -> None:
    """Usage ingestion reports operations with no snapshot or partition: nothing to check,
    so no ERROR run is recorded on the covered dataset."""
    ledger = dataset_urn("finance.ledger_entries")
    store = store_of(published.workdir)
    before = all_rows(store)
    operation = OperationClass(
        timestampMillis=published.tick(),
        operationType=OperationTypeClass.INSERT,
        lastUpdatedTimestamp=published.clock,
    )
    published.catalog.emit([acting_as(DEFAULT_ACTOR, ledger, operation)])
    written = [row for row in all_rows(store) if row not in before]
    published.react()

    assert [row for row in all_rows(store) if row not in before] == written  # the operation only
