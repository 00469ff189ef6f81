"""The reflex action's per-route report: what each route saw, acted on, ignored, refused and
failed; printed once by the demo, logged when a `datahub actions` pipeline closes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeLogClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)
from datahub_actions.pipeline.pipeline import Pipeline

from reflex_actions.action import report as report_module
from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.action.report import MAX_REASON, ReflexReport, RouteReport, group_reason
from reflex_actions.catalog.base import AspectT, CatalogError
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.run import INTRUDER, STEWARD, Demo, embedded_pipeline_config
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.stages import PAYMENTS_LESSON, FullLoop

LESSONS = "glossaryTerm/structuredProperties"
NOT_AN_APPROVER = "<urn> is not an approver and does not own <urn>"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:snowflake,db.orders,PROD)"


def _envelope(entity_type: str, urn: str, aspect_name: str, value: bytes) -> EventEnvelope:
    mcl = MetadataChangeLogClass(
        entityType=entity_type,
        entityUrn=urn,
        changeType=ChangeTypeClass.UPSERT,
        aspectName=aspect_name,
        aspect=GenericAspectClass(value=value, contentType="application/json"),
        created=AuditStampClass(time=1, actor="urn:li:corpuser:datahub"),
    )
    return EventEnvelope(
        METADATA_CHANGE_LOG_EVENT_V1_TYPE, MetadataChangeLogEvent.from_class(mcl), {}
    )


class UnreachableCatalog(LiteCatalog):
    """A store that fails every read, as a server that went away does."""

    def get_aspect(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        raise CatalogError("the store went away")


@pytest.fixture
def action(tmp_path: Path) -> Iterator[ReflexAction]:
    action = ReflexAction(ReflexConfig(), LiteCatalog(tmp_path / "reflex.db"))
    yield action
    action.close()


def _rows(table: str) -> dict[str, list[str]]:
    """Route -> its seen, acted, ignored, refused and failed cells, from the text table."""
    rows = table.splitlines()[2:]
    return {row.split()[0]: row.split()[1:] for row in rows if not row.startswith(" ")}


def test_the_router_counts_dropped_ignored_and_failed_events(action: ReflexAction) -> None:
    action.act(_envelope("dataset", DATASET, "datasetProperties", b"{}"))
    action.act(_envelope("chart", "urn:li:chart:(looker,c)", "structuredProperties", b"{}"))
    action.act(_envelope("dataset", DATASET, "operation", b'{"timestampMillis": 0}'))
    action.act(_envelope("incident", "urn:li:incident:x", "incidentInfo", b"\xff not json"))
    action.act(_envelope("incident", "urn:li:incident:y", "incidentInfo", b"\xff"))

    report = action.get_report()
    assert report.dropped == 2
    assert report.routes["dataset/operation"] == RouteReport(seen=1, ignored=1)
    assert report.routes["incident/incidentInfo"] == RouteReport(
        seen=2, failed=2, errors={"MalformedEvent": 2}
    )
    # every route is listed, the quiet ones too
    assert report.routes["corpuser/corpUserStatus"] == RouteReport()
    assert report.total_assets_processed == 3 and report.total_actions_executed == 0


def test_a_catalog_error_is_counted_as_failed_then_raised(tmp_path: Path) -> None:
    action = ReflexAction(ReflexConfig(), UnreachableCatalog(tmp_path / "reflex.db"))
    event = _envelope("dataset", DATASET, "operation", b'{"timestampMillis": 0}')
    with pytest.raises(CatalogError, match="went away"):
        action.act(event)
    assert action.get_report().routes["dataset/operation"] == RouteReport(
        seen=1, failed=1, errors={"CatalogError": 1}
    )
    action.close()


def test_a_refused_approval_is_counted_under_its_route_with_its_grouped_reason(
    pending: Demo,
) -> None:
    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED", actor=INTRUDER)
    refused = pending.report.routes[LESSONS].model_copy()
    assert refused.refused == 1
    assert refused.refusals == {NOT_AN_APPROVER: 1}
    assert refused.acted == 0 and refused.failed == 0

    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")  # the steward may: published
    approved = pending.report.routes[LESSONS]
    assert approved.refused == 1 and approved.acted > refused.acted
    assert approved.seen == approved.acted + approved.ignored + approved.refused + approved.failed
    assert pending.report.routes["incident/incidentInfo"].seen == 0  # nothing resolved here


def test_the_demo_prints_one_combined_table_before_the_result(full_loop: FullLoop) -> None:
    headers = [n for n, line in enumerate(full_loop.lines) if line.startswith("Reflex report:")]
    assert len(headers) == 1
    (table,) = (full_loop.lines[n] for n in headers)
    assert full_loop.lines.index("\n== Result ==") > headers[0]
    rows = _rows(table)
    # both scenarios: two incidents A resolved, two lessons drafted and published
    assert set(rows) == {
        "incident/incidentInfo",
        LESSONS,
        "dataset/operation",
        "dataset/datasetProfile",
        "dataset/schemaMetadata",
        "corpuser/corpUserStatus",
        "dataset/structuredProperties",
        "schedule/tick",
    }
    assert int(rows[LESSONS][1]) >= 4  # acted: two confirmations, two approvals
    assert int(rows[LESSONS][3]) == 1  # refused: the intruder's approval
    assert f"  refused 1x: {NOT_AN_APPROVER}" in table


def test_a_datahub_actions_pipeline_logs_the_report_when_it_closes(
    drafted: Demo, caplog: pytest.LogCaptureFixture
) -> None:
    drafted.catalog.set_structured_properties(
        PAYMENTS_LESSON, {ROOT_CAUSE_STATUS: ["CONFIRMED"]}, STEWARD
    )
    pipeline = Pipeline.create(embedded_pipeline_config(drafted.workdir))
    pipeline.run()
    with caplog.at_level(logging.WARNING, logger=report_module.__name__):
        pipeline.close()

    (record,) = [r for r in caplog.records if r.name == report_module.__name__]
    assert record.levelno == logging.WARNING
    table = record.getMessage()
    # the confirmation, and Reflex's own PENDING after the report (which opens gate 2)
    assert table.startswith("Reflex report: 2 events read on 8 routes")
    assert _rows(table)[LESSONS] == ["2", "2", "0", "0", "0"]
    assert isinstance(pipeline.action, ReflexAction)
    report = pipeline.action.get_report()
    assert report.status == "success"
    assert json.loads(json.dumps(report.as_obj()))["routes"][LESSONS]["acted"] == 2


def test_reasons_are_grouped_and_bounded() -> None:
    dataset = "urn:li:dataset:(urn:li:dataPlatform:snowflake,db.t,PROD)"
    assert group_reason(f"urn:li:corpuser:maria does not own {dataset}.") == (
        "<urn> does not own <urn>."
    )
    assert group_reason("scope 'finance.payments' has 3 datasets\nmore detail") == (
        "scope <value> has <n> datasets"
    )
    long = group_reason("x" * 10_000)
    assert len(long) == MAX_REASON and long.endswith("…")


def test_reports_add_up_across_runs() -> None:
    total = ReflexReport()
    for reason in ("urn:li:corpuser:a is not an approver", "urn:li:corpuser:b is not an approver"):
        run = ReflexReport.for_routes([LESSONS])
        run.record(LESSONS, wrote=True, refusals=[reason])
        run.record(LESSONS, wrote=True)
        run.record_dropped()
        total.add(run)
    assert total.routes[LESSONS] == RouteReport(
        seen=4, acted=2, refused=2, refusals={"<urn> is not an approver": 2}
    )
    assert total.dropped == 2 and total.total_actions_executed == 2


def test_the_table_s_counts_read_as_words_one_event_on_one_route() -> None:
    report = ReflexReport.for_routes([LESSONS])
    report.record(LESSONS, wrote=True)
    assert report.as_text().startswith("Reflex report: 1 event read on 1 route, 0 dropped")
