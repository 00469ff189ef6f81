"""The proposal's backtest of a referencing control on a child table (issue 15, item 6): each of
the child's partitions is checked against the same partition of its parent's table, read by the
same engine in one query, as landing checks a landed partition; the parent's partitions before
or after do not count."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.proposal import propose
from reflex_actions.kinds.orphaned_references import ORPHANED_REFERENCES
from reflex_actions.lessons.model import Lesson, LessonState
from tests.catalog.memory_catalog import MemoryCatalog
from tests.conftest import write_snapshot
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server
from tests.handlers.builders import add_dataset, context, lesson

__all__ = ["postgres_server"]  # the session fixture, used by name below

URL_VARIABLE = "REFLEX_TEST_REFERENCES_PG_URL"
ORDERS = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.orders,PROD)"
LEDGER = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.ledger,PROD)"
ON_POSTGRES = {"platform": "postgres", "engine": "postgres", "connection": {"url": URL_VARIABLE}}
CONTROL = {
    "type": "referential_integrity",
    "field": "transaction_id",
    "references": {"dataset": LEDGER, "field": "transaction_id"},
}
#: the parent's daily partitions (none on 2026-09-04)
LEDGER_DAYS = {
    "2026-09-01": ["t1", "t2"],
    "2026-09-02": ["t3"],
    "2026-09-03": ["t4"],
    "2026-09-05": ["t6"],
}
#: the child's: 09-02 names t9, in no ledger day (labelled: caught); 09-03 names t1, in the
#: ledger's 09-01 but not its 09-03 (unlabelled: a false alarm a whole-table parent would not
#: raise); 09-04 names t4, in the ledger's 09-03 but the ledger has no 09-04 (labelled: caught,
#: where pairing with the latest earlier partition would miss it); 09-05 is clean but labelled
#: (missed)
ORDER_DAYS = {
    "2026-09-01": ["t1", "t2"],
    "2026-09-02": ["t3", "t9"],
    "2026-09-03": ["t1"],
    "2026-09-04": ["t4"],
    "2026-09-05": ["t6"],
}


def against(day: str) -> str:
    """The detail of a child partition's outcome: the parent partition it was checked against."""
    return f"checked against shop.ledger {day} (the same partition)"


def _rows(days: dict[str, list[str]]) -> list[dict[str, str]]:
    return [{"transaction_id": txn, "load_date": day} for day, txns in days.items() for txn in txns]


@pytest.fixture(scope="module")
def shop(postgres_server: PostgresServer) -> PostgresServer:
    create_table(postgres_server, ("shop", "ledger"), _rows(LEDGER_DAYS))
    create_table(postgres_server, ("shop", "orders"), _rows(ORDER_DAYS))
    return postgres_server


@pytest.fixture
def estate(tmp_path: Path) -> Iterator[HandlerContext]:
    """ORDERS (the child) and LEDGER (its parent), both on the postgres platform, histories
    being their tables' partitions; the child's folder holds only its labels."""
    root = tmp_path / "histories"
    (root / "shop.orders").mkdir(parents=True)
    (root / "shop.orders" / "labels.yaml").write_text(
        "failures: [2026-09-02, 2026-09-04, 2026-09-05]\n"
    )
    catalog = MemoryCatalog()
    add_dataset(catalog, ORDERS)
    add_dataset(catalog, LEDGER)
    histories = {"root": root, "partition_column": "load_date"}
    ctx = context(catalog, histories=histories, engines=[ON_POSTGRES])
    yield ctx
    for engine in ctx.engines.values():
        engine.close()


def confirmed_on_orders(control: dict[str, object]) -> Lesson:
    """An orphaned-references lesson from shop.orders, its root cause confirmed."""
    return lesson(
        state=LessonState.CONFIRMED,
        source_dataset=ORDERS,
        affected_assets=[ORDERS],
        failure_pattern=ORPHANED_REFERENCES,
        control=control,
    )


def test_a_child_table_is_backtested_against_the_same_partition_of_its_parent_table(
    shop: PostgresServer, estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, shop.url())
    proposed = confirmed_on_orders(CONTROL)

    propose(proposed, estate)

    report = proposed.report
    # snapshots | TP | FP | TN | FN | not evaluable | precision | recall
    assert "| shop.orders | 5 | 2 | 1 | 1 | 1 | 0 | 67% | 67% |" in report
    assert "| true / false positives | 2 / 1 |" in report
    assert f"| 2026-09-03 | flagged, not labelled | 1 | {against('2026-09-03')} |" in report
    assert f"| 2026-09-04 | caught (labelled failure) | 1 | {against('2026-09-04')} |" in report
    assert "does not read" not in report
    assert proposed.backtest is not None
    assert proposed.state is LessonState.PENDING_APPROVAL


def test_a_parent_table_without_the_partition_column_leaves_the_child_not_evaluable(
    shop: PostgresServer, estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shop.accounts has no load_date: its partitions cannot be listed, so no child partition
    has a parent partition to be checked against, and each says why."""
    monkeypatch.setenv(URL_VARIABLE, shop.url())
    create_table(shop, ("shop", "accounts"), [{"transaction_id": "t1"}])
    accounts = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.accounts,PROD)"
    add_dataset(estate.catalog, accounts)
    proposed = confirmed_on_orders(
        {**CONTROL, "references": {"dataset": accounts, "field": "transaction_id"}}
    )

    propose(proposed, estate)

    report = proposed.report
    assert "| shop.orders | 5 | 0 | 0 | 0 | 0 | 5 |" in report
    (reason,) = [line for line in report.splitlines() if line.startswith("- shop.orders:")]
    assert "shop.accounts, which it references, is not evaluable" in reason
    assert "load_date" in reason and shop.password not in report


def test_children_on_two_engines_are_each_checked_against_the_parent_their_engine_reads(
    shop: PostgresServer, estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shop.returns has snapshot files, read by the embedded engine: it is checked against the
    ledger's history folder, while shop.orders' partitions are still checked against the
    ledger's table (its folder's files are none of the postgres engine's)."""
    monkeypatch.setenv(URL_VARIABLE, shop.url())
    root = estate.config.histories.root
    assert root is not None
    write_snapshot(root / "shop.ledger" / "2026-09-01.parquet", [{"transaction_id": "t1"}])
    write_snapshot(root / "shop.returns" / "2026-09-01.parquet", [{"transaction_id": "t1"}])
    write_snapshot(root / "shop.returns" / "2026-09-02.parquet", [{"transaction_id": "t7"}])
    (root / "shop.returns" / "labels.yaml").write_text("failures: [2026-09-02]\n")
    returns = "urn:li:dataset:(urn:li:dataPlatform:s3,shop.returns,PROD)"
    add_dataset(estate.catalog, returns)
    proposed = confirmed_on_orders(CONTROL)

    propose(proposed, estate, scope=[ORDERS, returns])

    report = proposed.report
    assert "| shop.orders | 5 | 2 | 1 | 1 | 1 | 0 | 67% | 67% |" in report
    assert "| shop.returns | 2 | 1 | 0 | 1 | 0 | 0 | 100% | 100% |" in report
    earlier = "checked against shop.ledger 2026-09-01 (the latest at or before 2026-09-02)"
    assert f"| shop.returns | 2026-09-02 | caught (labelled failure) | 1 | {earlier} |" in report
    assert f"| 2026-09-04 | caught (labelled failure) | 1 | {against('2026-09-04')} |" in report
    assert "| true / false positives | 3 / 1 |" in report
