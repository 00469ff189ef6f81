"""Landing on a warehouse table (issue 15, item 5): an ``operation`` on a covered dataset whose
platform has an engine runs the control on the live table, or on the partition it names when
``histories.partition_column`` is configured; a platform without an engine stays skipped."""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    IncidentInfoClass,
)

from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.landing_runs import on_operation
from tests.catalog.memory_catalog import MemoryCatalog
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server
from tests.handlers.builders import (
    LESSON,
    PAYMENTS,
    add_dataset,
    context,
    landed_on,
    published_lesson,
    written,
)

__all__ = ["postgres_server"]  # the session fixture, used by name below

APPROVED_AT = 100
URL_VARIABLE = "REFLEX_TEST_LANDING_PG_URL"
ON_POSTGRES = {"platform": "snowflake", "engine": "postgres", "connection": {"url": URL_VARIABLE}}


@pytest.fixture(scope="module")
def payments_table(postgres_server: PostgresServer) -> PostgresServer:
    """finance.payments (PAYMENTS' urn name) on the server: T1 twice on 2026-09-02 only."""
    rows = [
        {"transaction_id": "T1", "load_date": "2026-09-01"},
        {"transaction_id": "T2", "load_date": "2026-09-01"},
        {"transaction_id": "T1", "load_date": "2026-09-02"},
        {"transaction_id": "T1", "load_date": "2026-09-02"},
    ]
    create_table(postgres_server, ("finance", "payments"), rows)
    return postgres_server


def covered(**config: object) -> tuple[MemoryCatalog, object]:
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    published_lesson(catalog, approved_at=APPROVED_AT)
    return catalog, context(catalog, **config)


def run_events(ctx) -> list[AssertionRunEventClass]:
    return written(ctx, AssertionRunEventClass)


def incidents(ctx) -> list[IncidentInfoClass]:
    return written(ctx, IncidentInfoClass)


def test_an_operation_naming_no_file_runs_the_control_on_the_live_table(
    payments_table: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, payments_table.url())
    _, ctx = covered(engines=[ON_POSTGRES])

    on_operation(landed_on(PAYMENTS, APPROVED_AT + 1), ctx)

    (run,) = run_events(ctx)
    assert run.asserteeUrn == PAYMENTS and run.assertionUrn == assertion_urn(LESSON, PAYMENTS)
    assert run.result.type == "FAILURE"
    assert run.result.nativeResults["violation_count"] == "2"  # T1 three times in the table
    assert run.result.rowCount == 4
    assert len(incidents(ctx)) == 1
    assert payments_table.password not in str(run)


def test_a_partition_is_judged_alone_when_the_partition_column_is_configured(
    payments_table: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, payments_table.url())
    histories = {"partition_column": "load_date"}
    _, clean_ctx = covered(engines=[ON_POSTGRES], histories=histories)
    on_operation(landed_on(PAYMENTS, APPROVED_AT + 1, partition="2026-09-01"), clean_ctx)
    (clean,) = run_events(clean_ctx)
    assert clean.result.type == "SUCCESS" and clean.result.rowCount == 2
    assert clean.runId == "2026-09-01" and incidents(clean_ctx) == []

    _, dirty_ctx = covered(engines=[ON_POSTGRES], histories=histories)
    on_operation(landed_on(PAYMENTS, APPROVED_AT + 2, partition="2026-09-02"), dirty_ctx)
    (dirty,) = run_events(dirty_ctx)
    assert dirty.result.type == "FAILURE" and dirty.result.nativeResults["violation_count"] == "1"


def test_an_unset_connection_variable_is_an_error_run_naming_it_never_an_incident(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    _, ctx = covered(engines=[ON_POSTGRES])

    on_operation(landed_on(PAYMENTS, APPROVED_AT + 1), ctx)

    (run,) = run_events(ctx)
    assert run.result.type == "ERROR" and incidents(ctx) == []
    assert URL_VARIABLE in run.result.error.properties["message"]


def test_without_an_engine_an_operation_naming_no_file_is_skipped() -> None:
    _, ctx = covered()
    on_operation(landed_on(PAYMENTS, APPROVED_AT + 1), ctx)
    assert ctx.out.directives == []
