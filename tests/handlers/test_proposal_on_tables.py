"""The proposal's backtest on table histories (issue 15, item 6): a candidate on a platform with
an engine and ``histories.partition_column`` set is backtested on its table's partitions, on
its own engine, beside the source's folder history on the embedded one; an engine that cannot
connect leaves that candidate not evaluable with the reason, and the others still backtest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.proposal import propose
from reflex_actions.lessons.model import LessonState
from tests.catalog.memory_catalog import MemoryCatalog
from tests.conftest import write_snapshot
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server
from tests.handlers.builders import PAYMENTS, add_dataset, context, kinds, lesson

__all__ = ["postgres_server"]  # the session fixture, used by name below

URL_VARIABLE = "REFLEX_TEST_PROPOSAL_PG_URL"
SETTLEMENTS = "urn:li:dataset:(urn:li:dataPlatform:postgres,finance.settlements,PROD)"
REFUNDS = "urn:li:dataset:(urn:li:dataPlatform:postgres,finance.refunds,PROD)"
ON_POSTGRES = {"platform": "postgres", "engine": "postgres", "connection": {"url": URL_VARIABLE}}
#: finance.settlements' daily loads: a labelled duplicate (caught), an unlabelled one (a false
#: alarm), a clean day and a clean day labelled (missed)
SETTLEMENT_DAYS = {
    "2026-09-01": ["s1", "s2"],
    "2026-09-02": ["s1", "s1", "s3"],
    "2026-09-03": ["s4", "s4"],
    "2026-09-04": ["s5"],
}


@pytest.fixture(scope="module")
def settlements_table(postgres_server: PostgresServer) -> PostgresServer:
    rows = [
        {"transaction_id": txn, "load_date": day}
        for day, txns in SETTLEMENT_DAYS.items()
        for txn in txns
    ]
    create_table(postgres_server, ("finance", "settlements"), rows)
    refunds = [
        ("2026-09-01", "r1"),
        ("2026-09-02", "r2"),
        ("2026-09-02", "r2"),
        ("2026-09-03", "r3"),
    ]
    create_table(
        postgres_server,
        ("finance", "refunds"),
        [{"transaction_id": txn, "load_date": day} for day, txn in refunds],
    )
    return postgres_server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The histories root: finance.payments' snapshot files (its 09-02 a caught duplicate), and
    for finance.settlements, whose rows are in its table, only the labels of its partitions."""
    root = tmp_path / "histories"
    write_snapshot(root / "finance.payments" / "2026-09-01.parquet", [{"transaction_id": "p1"}])
    write_snapshot(root / "finance.payments" / "2026-09-02.parquet", [{"transaction_id": "p1"}] * 2)
    (root / "finance.payments" / "labels.yaml").write_text("failures: [2026-09-02]\n")
    (root / "finance.settlements").mkdir()
    (root / "finance.settlements" / "labels.yaml").write_text(
        "failures: [2026-09-02, 2026-09-04]\n"
    )
    return root


@pytest.fixture
def estate(root: Path) -> Iterator[HandlerContext]:
    """PAYMENTS and its similar candidate SETTLEMENTS, on the postgres platform; the engines the
    context opens are closed after the test."""
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS)
    add_dataset(catalog, SETTLEMENTS)
    histories = {"root": root, "partition_column": "load_date"}
    ctx = context(catalog, histories=histories, engines=[ON_POSTGRES])
    yield ctx
    for engine in ctx.engines.values():
        engine.close()


def row(dataset: str, cells: str) -> str:
    """A dataset's row of the backtest table: snapshots | TP | FP | TN | FN | not evaluable |
    precision | recall."""
    return f"| {dataset} | {cells} |"


def test_a_candidate_on_postgres_is_backtested_on_its_partitions_beside_the_source_folder(
    settlements_table: PostgresServer, estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, settlements_table.url())
    proposed = lesson(state=LessonState.CONFIRMED)

    propose(proposed, estate)

    report = proposed.report
    assert row("finance.payments", "2 | 1 | 0 | 1 | 0 | 0 | 100% | 100%") in report
    assert row("finance.settlements", "4 | 1 | 1 | 1 | 1 | 0 | 50% | 50%") in report
    assert report.index(row("finance.payments", "2")) < report.index(
        row("finance.settlements", "4")
    )  # the source first, as the histories were gathered
    assert "| true / false positives | 2 / 1 |" in report  # scored over both engines' outcomes
    assert "| finance.settlements | 2026-09-03 | flagged, not labelled | 1 |" in report
    assert settlements_table.password not in report
    assert proposed.state is LessonState.PENDING_APPROVAL


def test_a_candidate_whose_engine_cannot_connect_is_not_evaluable_and_the_source_backtests(
    estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    proposed = lesson(state=LessonState.CONFIRMED)

    propose(proposed, estate)

    report = proposed.report
    assert row("finance.payments", "2 | 1 | 0 | 1 | 0 | 0 | 100% | 100%") in report
    assert row("finance.settlements", "0 | 0 | 0 | 0 | 0 | 0") in report
    (reason,) = [line for line in report.splitlines() if line.startswith("- finance.settlements:")]
    assert "not evaluable" in reason and URL_VARIABLE in reason
    assert "| applicable assets | 1 of 2 |" in report
    assert kinds(estate.out.directives) == ["SaveLesson", "SetProperties"]  # no incident
    assert proposed.state is LessonState.PENDING_APPROVAL


def test_a_source_on_a_table_is_labelled_by_the_incident_dates_as_a_folder_is(
    settlements_table: PostgresServer, estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's history is its table's partitions (no folder, no labels.yaml): the day the
    incident's words name is its labelled failure, as for a folder's snapshot."""
    monkeypatch.setenv(URL_VARIABLE, settlements_table.url())
    add_dataset(estate.catalog, REFUNDS)
    proposed = lesson(
        state=LessonState.CONFIRMED,
        source_dataset=REFUNDS,
        affected_assets=[REFUNDS],
        dated_failures=["2026-09-02"],
    )

    propose(proposed, estate)

    report = proposed.report
    assert row("finance.refunds", "3 | 1 | 0 | 2 | 0 | 0 | 100% | 100%") in report
    caught = "| 2026-09-02 | caught (labelled failure) | 1 | incident urn:li:incident:t |"
    assert f"| finance.refunds {caught}" in report
    assert row("finance.settlements", "4 | 1 | 1 | 1 | 1 | 0 | 50% | 50%") in report


def test_a_history_folder_with_snapshot_files_wins_over_the_table(
    estate: HandlerContext, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PAYMENTS' platform is given an engine too: its folder is still its history, read on the
    embedded engine, and no engine is opened for it (the connection variable is unset)."""
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    on_snowflake = {**ON_POSTGRES, "platform": "snowflake"}
    ctx = context(
        estate.catalog,
        histories={"root": root, "partition_column": "load_date"},
        engines=[on_snowflake],
    )

    found = ctx.histories.backtest_history(PAYMENTS)

    assert found is not None
    history, engine = found
    assert engine is None and ctx.engines == {}
    assert history.folder == root / "finance.payments"
    assert [point.snapshot_id for point in history.points] == ["2026-09-01", "2026-09-02"]
