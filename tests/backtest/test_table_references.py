"""A referencing control backtested on a partition history (issue 15, item 6): each child
partition is checked against the parent's partition of the same value, read by the same engine
in one query, as landing checks a landed partition; a parent whose partitions cannot be listed
leaves the child's points not evaluable, saying so."""

from __future__ import annotations

from pathlib import Path

from reflex_actions.backtest import backtest
from reflex_actions.backtest.history import partition_history, unreadable_history
from reflex_actions.controls import parse_control_spec
from reflex_actions.engines.base import FileTarget
from reflex_actions.engines.duckdb import DuckDBEngine
from tests.conftest import write_snapshot

PARENT_URN = "urn:li:dataset:(urn:li:dataPlatform:s3,shop.ledger,PROD)"
CONTROL = parse_control_spec(
    {
        "type": "referential_integrity",
        "field": "transaction_id",
        "references": {"dataset": PARENT_URN, "field": "transaction_id"},
    }
)


def _table(path: Path, days: dict[str, list[str]]) -> FileTarget:
    write_snapshot(
        path, [{"transaction_id": t, "load_date": d} for d, ts in days.items() for t in ts]
    )
    return FileTarget(path)


def test_each_child_partition_is_checked_against_the_parents_partition_of_its_value(
    tmp_path: Path,
) -> None:
    engine = DuckDBEngine()
    ledger = _table(tmp_path / "ledger.parquet", {"d1": ["t1", "t2"], "d2": ["t3"]})
    orders = _table(
        tmp_path / "orders.parquet",
        # d2 names t1, in the ledger's d1 only; the ledger has no d3 (an empty partition)
        {"d1": ["t1", "t2"], "d2": ["t3", "t1"], "d3": ["t2"]},
    )
    labels = tmp_path / "labels.yaml"
    labels.write_text("failures: [d2]\n")
    child = partition_history(engine, orders, "load_date", labels=labels)
    parent = partition_history(engine, ledger, "load_date", dataset="shop.ledger")

    report = backtest(CONTROL, [child], references={PARENT_URN: parent}, engine=engine)

    by_id = {outcome.snapshot_id: outcome for outcome in report.per_snapshot}
    assert {sid: o.verdict for sid, o in by_id.items()} == {
        "d1": "true_negative",
        "d2": "true_positive",
        "d3": "false_positive",
    }
    assert [by_id[sid].violation_count for sid in ("d1", "d2", "d3")] == [0, 1, 1]
    assert by_id["d3"].checked_against == "shop.ledger d3 (the same partition)"
    assert by_id["d2"].sample == [{"missing_parent_value": "t1", "occurrences": 1}]
    engine.close()


def test_a_parent_whose_partitions_cannot_be_listed_leaves_the_child_not_evaluable(
    tmp_path: Path,
) -> None:
    engine = DuckDBEngine()
    orders = _table(tmp_path / "orders.parquet", {"d1": ["t1"]})
    child = partition_history(engine, orders, "load_date")
    parent = unreadable_history(
        "shop.ledger", "shop.ledger partitioned by load_date", "not evaluable: no such table"
    )

    report = backtest(CONTROL, [child], references={PARENT_URN: parent}, engine=engine)

    (outcome,) = report.per_snapshot
    assert outcome.verdict == "not_evaluable"
    assert outcome.reason == "shop.ledger, which it references, is not evaluable: no such table"
    engine.close()
