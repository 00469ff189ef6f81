"""Both shipped scenarios, end to end through the real datahub-actions Pipeline on DataHub Lite.

``run_demo`` drives the steward's steps and the pipeline; these tests then read the store
directly and check each link of the chain that DESIGN.md §1 promises.
"""

from __future__ import annotations

import duckdb
import pytest
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    AssertionResultTypeClass,
    AssertionRunEventClass,
    AssertionSourceTypeClass,
    IncidentInfoClass,
    IncidentStateClass,
    OwnershipClass,
    StructuredPropertiesClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.demo.history import (
    LANDING_DAY,
    LANDING_FOLDER,
    OWNERSHIP_INCIDENT,
    PAYMENTS_INCIDENT,
)
from reflex_actions.demo.metadata import incidents
from reflex_actions.demo.run import STEWARD
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for, load_lesson
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import COVERAGE, OWNERSHIP_CHANGE_APPROVAL
from tests.loop.store import (
    history,
    incidents_b,
    latest,
    property_values,
    store_of,
    stored_lesson,
    urns_with,
)
from tests.stages import FullLoop

PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
OWNERSHIP_LESSON = lesson_urn_for(OWNERSHIP_INCIDENT)
#: every lesson the default demo publishes, one per scenario
#: one lesson per incident the demo resolves (incident A of each scenario)
DEMO_LESSONS = [lesson_urn_for(str(mcp.entityUrn)) for mcp in incidents()]
PAYMENTS = dataset_urn("finance.payments")
LEDGER = dataset_urn("finance.ledger_entries")
ORPHANED = [dataset_urn("finance.daily_revenue"), dataset_urn("finance.invoice_lines")]
CAROL = user_urn("carol")


def test_the_demo_closes_both_loops(full_loop: FullLoop) -> None:
    assert full_loop.closed
    assert not [line for line in full_loop.lines if "LOOP NOT CLOSED" in line]
    for lesson_urn in (PAYMENTS_LESSON, OWNERSHIP_LESSON):
        lesson = stored_lesson(store_of(full_loop.workdir), lesson_urn)
        assert lesson.state is LessonState.PUBLISHED
        approvals = [d for d in lesson.decisions if d.decision == "scope approved"]
        assert [d.actor for d in approvals] == [STEWARD]


def test_duplicates_raise_incident_b_on_the_ledger_from_its_assertion(
    full_loop: FullLoop,
) -> None:
    store = store_of(full_loop.workdir)
    assertion = assertion_urn(PAYMENTS_LESSON, LEDGER)
    raised = incidents_b(store, LEDGER)
    assert list(raised) == [recurrence_incident_urn(assertion, LANDING_DAY.isoformat())]
    (info,) = raised.values()
    assert info.source is not None and info.source.sourceUrn == assertion
    assert info.entities == [LEDGER]
    assert info.status.state == IncidentStateClass.ACTIVE
    assert PAYMENTS_LESSON in (info.description or "")
    assert PAYMENTS_INCIDENT in (info.description or "")
    # incident A's own dataset is not where the recurrence was found
    assert not incidents_b(store, PAYMENTS)


def test_the_ledger_run_event_is_a_failure_counting_the_duplicates(full_loop: FullLoop) -> None:
    store = store_of(full_loop.workdir)
    assertion = assertion_urn(PAYMENTS_LESSON, LEDGER)
    # the landing day's run (the stale-data scenario loads the ledger cleanly again later)
    runs = [e for _, e in history(store, assertion, AssertionRunEventClass)]
    [event] = [e for e in runs if e.runId == LANDING_DAY.isoformat()]
    assert event.result is not None
    assert event.result.type == AssertionResultTypeClass.FAILURE
    assert event.asserteeUrn == LEDGER
    assert [e.result.type for e in runs if e.runId == "today"] == ["SUCCESS"]  # type: ignore[union-attr]
    landed = (
        full_loop.workdir
        / "snapshots"
        / LANDING_FOLDER
        / "finance.ledger_entries"
        / f"{LANDING_DAY}.parquet"
    )
    # counted independently of Reflex: rows beyond the first for each repeated key
    ((extra_rows,),) = duckdb.execute(
        "SELECT count(transaction_id) - count(DISTINCT transaction_id) FROM read_parquet(?)",
        [str(landed)],
    ).fetchall()
    assert extra_rows > 0
    assert event.result.unexpectedCount == extra_rows


def test_published_datasets_carry_coverage_and_an_external_assertion(
    full_loop: FullLoop,
) -> None:
    store = store_of(full_loop.workdir)
    covered: set[str] = set()
    for lesson_urn in DEMO_LESSONS:
        lesson = stored_lesson(store, lesson_urn)
        assert lesson.published_scope
        for dataset in lesson.published_scope:
            assert lesson_urn in property_values(store, dataset, COVERAGE)
            info = latest(store, assertion_urn(lesson_urn, dataset), AssertionInfoClass)
            assert info is not None and info.customAssertion is not None
            assert info.customAssertion.entity == dataset
            assert info.source is not None
            assert info.source.type == AssertionSourceTypeClass.EXTERNAL
            assert (info.customProperties or {})["reflex.lesson"] == lesson_urn
            covered.add(dataset)
    assert LEDGER in covered
    # coverage is only where a lesson was published
    uncovered = [d for d in urns_with(store, "datasetProperties") if d not in covered]
    assert uncovered
    for dataset in uncovered:
        assert property_values(store, dataset, COVERAGE) == []
    assert len(urns_with(store, AssertionInfoClass.ASPECT_NAME)) == sum(
        len(stored_lesson(store, u).published_scope) for u in DEMO_LESSONS
    )


@pytest.mark.parametrize("dataset", ORPHANED)
def test_orphaned_ownership_raises_incident_b_and_waits_for_approval(
    full_loop: FullLoop, dataset: str
) -> None:
    store = store_of(full_loop.workdir)
    assertion = assertion_urn(OWNERSHIP_LESSON, dataset)
    raised = incidents_b(store, dataset)
    assert len(raised) == 1
    ((incident, info),) = raised.items()
    assert info.source is not None and info.source.sourceUrn == assertion
    run = latest(store, assertion, AssertionRunEventClass)
    assert run is not None and run.result is not None
    assert run.result.type == AssertionResultTypeClass.FAILURE

    approvals = [
        rowid
        for rowid, properties in history(store, dataset, StructuredPropertiesClass)
        if _value(properties, OWNERSHIP_CHANGE_APPROVAL) == "APPROVED"
    ]
    assert approvals, "the steward's approval is not in the store"
    approved_at = approvals[0]
    ownership = history(store, dataset, OwnershipClass)
    before = [o for rowid, o in ownership if rowid < approved_at]
    after = [o for rowid, o in ownership if rowid > approved_at]
    assert before and after
    assert all(CAROL not in {owner.owner for owner in o.owners} for o in before)
    final = latest(store, dataset, OwnershipClass)
    assert final is not None
    assert (CAROL, "TECHNICAL_OWNER") in {(o.owner, str(o.type)) for o in final.owners}

    resolved = [
        rowid
        for rowid, i in history(store, incident, IncidentInfoClass)
        if i.status.state == IncidentStateClass.RESOLVED
    ]
    assert resolved and resolved[0] > approved_at
    final_info = latest(store, incident, IncidentInfoClass)
    assert final_info is not None and final_info.status.state == IncidentStateClass.RESOLVED
    assert STEWARD in (final_info.status.message or "")


def test_datasets_the_leaver_did_not_orphan_get_no_incident(full_loop: FullLoop) -> None:
    store = store_of(full_loop.workdir)
    lesson = stored_lesson(store, OWNERSHIP_LESSON)
    orphaned = {r.dataset for r in lesson.recurrences}
    assert orphaned == set(ORPHANED)
    assert set(lesson.published_scope) - orphaned
    for dataset in set(lesson.published_scope) - orphaned:
        sources = {i.source.sourceUrn for i in incidents_b(store, dataset).values() if i.source}
        assert assertion_urn(OWNERSHIP_LESSON, dataset) not in sources


def _value(properties: StructuredPropertiesClass, property_urn: str) -> str | float | None:
    for assignment in properties.properties:
        if assignment.propertyUrn == property_urn:
            return assignment.values[0] if assignment.values else None
    return None


def test_the_report_leads_with_the_recommended_scope(full_loop: FullLoop) -> None:
    """The refunds near miss (every snapshot a false alarm) is in the tables, not the headline."""
    lesson = load_lesson(
        LiteCatalog(full_loop.workdir / "reflex.db"), lesson_urn_for(PAYMENTS_INCIDENT)
    )
    assert lesson is not None
    assert lesson.report.startswith("#### Compiled control")
    assert (
        "**Recommended scope** (4 datasets): precision 100%, recall 100%, 7 labelled failures "
        "caught, 0 false alarms, 0 missed, 1 snapshot not evaluable." in lesson.report
    )
    assert "| finance.refunds | 30 | 0 | 30 |" in lesson.report
