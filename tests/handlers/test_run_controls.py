"""Landed-data decisions (``on_operation``): a failing control on a covered dataset raises
incident B, notes it on the lesson and records the run last; an operation the published
lesson cannot judge decides nothing."""

from __future__ import annotations

from pathlib import Path

from datahub.metadata.schema_classes import (
    AssertionResultTypeClass,
    AssertionRunEventClass,
    DatasetPropertiesClass,
    IncidentInfoClass,
    OperationClass,
    OperationTypeClass,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.assertions import (
    RECURRENCE_TYPE,
    assertion_urn,
    recurrence_incident_urn,
)
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.directives import Emit, SaveLesson, apply
from reflex_actions.handlers.landing_runs import on_operation
from reflex_actions.handlers.lesson_store import load_lesson
from tests.catalog.memory_catalog import MemoryCatalog
from tests.conftest import write_snapshot
from tests.handlers.builders import (
    LESSON,
    PAYMENTS,
    STEWARD,
    add_dataset,
    change,
    context,
    kinds,
    published_lesson,
    seed,
    written,
)

APPROVED_AT = 100
ASSERTION = assertion_urn(LESSON, PAYMENTS)
B = recurrence_incident_urn(ASSERTION, "s1")


def landing(at: int, **properties: str) -> AspectChange:
    operation = OperationClass(
        timestampMillis=at,
        lastUpdatedTimestamp=at,
        operationType=OperationTypeClass.INSERT,
        customProperties=properties,
    )
    return change(PAYMENTS, operation, time_ms=at)


def covered_estate(
    root: Path, folder: str = "payments", **landing: str
) -> tuple[MemoryCatalog, HandlerContext, Path]:
    """PAYMENTS covered by a lesson published at APPROVED_AT, and a landed snapshot in
    ``folder`` of the allowed landing root whose transaction T1 is there twice; ``landing``
    adds to the landing settings."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    published_lesson(catalog, approved_at=APPROVED_AT)
    rows = [{"transaction_id": t} for t in ("T1", "T1", "T2")]
    snapshot = write_snapshot(root / folder / "s1.parquet", rows)
    settings = {"allowed_roots": [str(root)], **landing}
    return catalog, context(catalog, landing=settings), snapshot


def test_duplicates_landing_raise_incident_b_note_it_then_record_the_run(tmp_path: Path) -> None:
    catalog, ctx, snapshot = covered_estate(tmp_path)

    on_operation(landing(APPROVED_AT + 1, snapshot=str(snapshot), snapshot_id="s1"), ctx)

    assert catalog.writes == []
    assert kinds(ctx.out.directives) == ["Emit", "SaveLesson", "Emit"]
    raised, noted, run = ctx.out.directives
    assert isinstance(raised, Emit) and isinstance(noted, SaveLesson) and isinstance(run, Emit)
    (incident,) = raised.mcps
    assert incident.entityUrn == B and isinstance(incident.aspect, IncidentInfoClass)
    assert incident.aspect.customType == RECURRENCE_TYPE
    assert [(r.incident, r.snapshot) for r in noted.lesson.recurrences] == [(B, "s1")]
    (event,) = run.mcps  # last: it marks this landing as handled
    assert isinstance(event.aspect, AssertionRunEventClass) and event.entityUrn == ASSERTION
    assert event.aspect.result is not None
    assert event.aspect.result.type == AssertionResultTypeClass.FAILURE
    assert event.aspect.result.unexpectedCount == 1

    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    assert catalog.get_aspect(B, IncidentInfoClass) is not None
    stored = load_lesson(catalog, LESSON)
    assert stored is not None and [r.incident for r in stored.recurrences] == [B]
    assert catalog.latest_timeseries(ASSERTION, AssertionRunEventClass) == event.aspect


def test_a_snapshot_located_by_its_id_alone_is_found_in_the_urn_named_folder(
    tmp_path: Path,
) -> None:
    """The landing locator's ``{name}`` is the urn's name, as a history folder's is, never the
    shorter name DataHub displays (``payments`` here): the landing is judged, not an ERROR."""
    locator = f"{tmp_path}/{{name}}/{{snapshot_id}}.parquet"
    catalog, ctx, _ = covered_estate(tmp_path, "finance.payments", locator=locator)
    seed(catalog, acting_as(STEWARD, PAYMENTS, DatasetPropertiesClass(name="payments")))

    on_operation(landing(APPROVED_AT + 1, snapshot_id="s1"), ctx)

    (run,) = written(ctx, AssertionRunEventClass)
    assert run.result is not None and run.result.type == AssertionResultTypeClass.FAILURE
    assert run.result.unexpectedCount == 1 and run.runId == "s1"


def test_an_operation_before_the_approval_decides_nothing(tmp_path: Path) -> None:
    """Replayed from before the lesson was published: judged by the coverage of its time."""
    _, ctx, snapshot = covered_estate(tmp_path)

    on_operation(landing(APPROVED_AT - 1, snapshot=str(snapshot), snapshot_id="s1"), ctx)

    assert ctx.out.directives == []


def test_an_operation_naming_no_snapshot_decides_nothing(tmp_path: Path) -> None:
    """Usage ingestion reports operations without data to check: no run, not even an ERROR."""
    _, ctx, _ = covered_estate(tmp_path)

    on_operation(landing(APPROVED_AT + 1), ctx)

    assert ctx.out.directives == []
