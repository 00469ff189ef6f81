"""The committed sales histories (the missing- and invalid-values scenarios' data): their labels
name exactly the snapshots the scenarios' controls flag, the landing snapshots break them, and
child tables refer only to their parent's rows of the same day."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.demo import history
from reflex_actions.executor import run_control
from tests.test_demo_history import read_labels, snapshot_files

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"
NOT_NULL_CUSTOMER = parse_control_spec({"type": "not_null", "field": "customer_id"})
QUANTITY_RANGE = parse_control_spec(
    {"type": "value_range", "field": "quantity", "min": 0, "max": history.MAX_LINE_QUANTITY}
)
#: dataset -> the control its labels are about, and the incident of its labelled failure
LABELLED_BY = {
    "sales.orders": (NOT_NULL_CUSTOMER, history.ORDERS_INCIDENT),
    "sales.invoices": (NOT_NULL_CUSTOMER, None),
    "sales.order_lines": (QUANTITY_RANGE, history.ORDER_LINES_INCIDENT),
}


def flagged(control: Control, files: list[Path]) -> set[str]:
    """The snapshot ids among ``files`` that ``control`` fails."""
    con = duckdb.connect()
    try:
        return {p.stem for p in files if not run_control(control, p, connection=con).passed}
    finally:
        con.close()


@pytest.mark.parametrize("dataset", sorted(LABELLED_BY))
def test_labels_name_exactly_the_snapshots_the_scenario_control_flags(dataset: str) -> None:
    control, incident = LABELLED_BY[dataset]
    folder = SNAPSHOTS / dataset
    labels = read_labels(folder)
    assert len(labels) == 1
    assert list(labels.values()) == [incident]
    assert flagged(control, snapshot_files(folder)) == set(labels)


def test_returns_are_clean_until_the_landing_day() -> None:
    files = snapshot_files(SNAPSHOTS / "sales.returns")
    assert len(files) == len(history.HISTORY_DAYS)
    assert read_labels(SNAPSHOTS / "sales.returns") == {}
    assert flagged(QUANTITY_RANGE, files) == set()


@pytest.mark.parametrize(
    ("dataset", "control"),
    [("sales.invoices", NOT_NULL_CUSTOMER), ("sales.returns", QUANTITY_RANGE)],
)
def test_the_landing_snapshot_holds_incident_b(dataset: str, control: Control) -> None:
    landed = history.landing_snapshot(SNAPSHOTS, dataset)
    assert flagged(control, [landed]) == {history.LANDING_DAY.isoformat()}


@pytest.mark.parametrize(
    ("child", "parent", "key"),
    [
        ("sales.order_lines", "sales.orders", ["order_id"]),
        ("sales.invoices", "sales.orders", ["order_id"]),
        ("sales.returns", "sales.order_lines", ["order_id", "line_no"]),
    ],
)
def test_children_refer_only_to_their_parent_rows_of_the_same_day(
    child: str, parent: str, key: list[str]
) -> None:
    """What a referential-integrity control on the sales tables may rely on: no orphan today."""
    columns = ", ".join(key)
    pairs = [
        (SNAPSHOTS / child / f"{day.isoformat()}.parquet", SNAPSHOTS / parent / f"{day}.parquet")
        for day in history.HISTORY_DAYS
    ]
    landed = [history.landing_snapshot(SNAPSHOTS, name) for name in (child, parent)]
    if all(path.is_file() for path in landed):  # a child lands with its parent's snapshot
        pairs.append((landed[0], landed[1]))
    for child_file, parent_file in pairs:
        ((orphans,),) = duckdb.execute(
            f"SELECT count(*) FROM (SELECT {columns} FROM read_parquet($child) "
            f"EXCEPT SELECT {columns} FROM read_parquet($parent))",
            {"child": str(child_file), "parent": str(parent_file)},
        ).fetchall()
        assert orphans == 0, child_file
