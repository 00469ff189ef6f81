"""Reflex believes only what DataHub authenticated, what Reflex wrote, and its own clock
(DESIGN §9): each test is a forged or unauthenticated write that must not pass."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub.metadata.schema_classes import (
    AssertionResultClass,
    AssertionResultTypeClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    AuditStampClass,
    OperationClass,
    OperationTypeClass,
    OwnerClass,
    OwnershipClass,
)

from reflex_actions.catalog.server import ServerCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.assertions import ROW_COUNTS, assertion_urn, run_event_mcp
from reflex_actions.handlers.authorization import UNAUTHENTICATED
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.directives import Emit, SaveLesson, SetProperties, apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.landing_runs import on_operation
from reflex_actions.handlers.own_runs import RUN_SEAL, OwnRuns
from reflex_actions.lessons.model import LessonState
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.times import parse_instant
from reflex_actions.vocabulary import APPROVAL
from tests.catalog.fake_gms import FakeGmsServer
from tests.catalog.memory_catalog import MemoryCatalog
from tests.conftest import write_snapshot
from tests.handlers.builders import (
    INTRUDER,
    LESSON,
    PAYMENTS,
    REFLEX,
    STEWARD,
    add_dataset,
    approval,
    change,
    context,
    pending_lesson,
    published_lesson,
    seed,
)

ADMIN = "urn:li:corpuser:admin"
ASSERTION = assertion_urn(LESSON, PAYMENTS)


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


# --- Reflex's own records: only its run events count ----------------------------------------

VOLUME = {"type": "volume", "max_drop": 0.3, "window": 8}


def _forged_run(
    catalog: MemoryCatalog, run_id: str, at: int, native: dict[str, str] | None = None
) -> None:
    """A run event on Reflex's assertion that someone else wrote."""
    run = AssertionRunEventClass(
        timestampMillis=at,
        runId=run_id,
        asserteeUrn=PAYMENTS,
        assertionUrn=ASSERTION,
        status=AssertionRunStatusClass.COMPLETE,
        result=AssertionResultClass(type=AssertionResultTypeClass.SUCCESS, nativeResults=native),
    )
    seed(catalog, acting_as(INTRUDER, ASSERTION, run))


def _landed(root: Path, rows: int, snapshot_id: str, at: int = 1_000) -> AspectChange:
    snapshot = write_snapshot(
        root / "payments" / f"{snapshot_id}.parquet",
        [{"transaction_id": f"T{n}"} for n in range(rows)],
    )
    operation = OperationClass(
        timestampMillis=at,
        lastUpdatedTimestamp=at,
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": snapshot_id},
    )
    return change(PAYMENTS, operation, time_ms=at)


def _run_result(ctx: HandlerContext) -> AssertionRunEventClass:
    (run,) = [
        mcp.aspect
        for directive in ctx.out.directives
        if isinstance(directive, Emit)
        for mcp in directive.mcps
        if isinstance(mcp.aspect, AssertionRunEventClass)
    ]
    return run


def test_a_run_event_forged_in_2100_does_not_mark_a_landing_judged(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    published_lesson(catalog, approved_at=100)
    _forged_run(catalog, "s1", at=parse_instant("2100-01-01"))
    ctx = context(catalog, landing={"allowed_roots": [str(tmp_path)]})
    rows = [{"transaction_id": t} for t in ("T1", "T1", "T2")]
    snapshot = write_snapshot(tmp_path / "payments" / "s1.parquet", rows)
    operation = OperationClass(
        timestampMillis=1_000,
        lastUpdatedTimestamp=1_000,
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": "s1"},
    )

    on_operation(change(PAYMENTS, operation, time_ms=1_000), ctx)

    run = _run_result(ctx)
    assert run.runId == "s1" and run.result is not None
    assert run.result.type == AssertionResultTypeClass.FAILURE


def test_forged_row_counts_are_no_baseline_for_a_half_load(tmp_path: Path) -> None:
    """Eight forged counts of 102 would make a load of 102 rows look normal: they are not
    Reflex's, so the half load is judged on Reflex's own counts of 200 rows."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    published_lesson(catalog, approved_at=100, control=VOLUME)
    ctx = context(catalog, landing={"allowed_roots": [str(tmp_path)]})
    on_operation(_landed(tmp_path, 200, "day-1", at=1_000), ctx)
    apply(ctx.out.directives, catalog, ctx.config.service_actor)
    assert _run_result(ctx).result.type == AssertionResultTypeClass.SUCCESS  # type: ignore[union-attr]
    _forged_run(catalog, "day-1b", 1_500, {ROW_COUNTS: json.dumps([102] * 8)})
    ctx = context(catalog, landing={"allowed_roots": [str(tmp_path)]})

    on_operation(_landed(tmp_path, 102, "day-2", at=2_000), ctx)

    run = _run_result(ctx)
    assert run.result is not None and run.result.type == AssertionResultTypeClass.FAILURE
    assert json.loads(run.result.nativeResults[ROW_COUNTS]) == [200, 102]  # type: ignore[index]


def test_on_a_server_only_runs_sealed_by_reflex_count() -> None:
    """GMS's timeseries reads name no writer: Reflex's runs carry a seal keyed by its own
    credentials. A forged run, even with a seal copied from Reflex's, is not Reflex's."""
    tokens = {"reflex-token": REFLEX, "mallory-token": INTRUDER}
    with FakeGmsServer(tokens, metadata_service_auth=True) as fake:
        reflex, forger = (
            ServerCatalog(
                DataHubGraph(DatahubClientConfig(server=fake.url, token=t)), owns_graph=True
            )
            for t in tokens
        )
        runs = OwnRuns(reflex, is_own=lambda _: False, key=reflex.run_seal_key())
        assert runs.key is not None
        mine = run_event_mcp(ASSERTION, PAYMENTS, 1_000, "s1", None, "unreadable", REFLEX, runs)
        reflex.emit([mine])
        seal = mine.aspect.result.nativeResults[RUN_SEAL]  # type: ignore[union-attr]
        _forged = OwnRuns(forger, is_own=lambda _: False, key=forger.run_seal_key())
        forged = run_event_mcp(ASSERTION, PAYMENTS, 2_000, "s2", None, "x", INTRUDER, _forged)
        copied = run_event_mcp(ASSERTION, PAYMENTS, 3_000, "s3", None, "x", INTRUDER, runs)
        copied.aspect.result.nativeResults[RUN_SEAL] = seal  # type: ignore[union-attr]
        forger.emit([forged, copied])

        assert runs.latest(ASSERTION) == mine.aspect
        assert runs.judged(ASSERTION, "s1")
        assert not runs.judged(ASSERTION, "s2") and not runs.judged(ASSERTION, "s3")
        for catalog in (reflex, forger):
            catalog.close()
