"""The committed sales histories (the data of the missing-values, invalid-values, orphaned-
references and schema-change scenarios): their labels
name exactly the snapshots the scenarios' controls flag, the landing snapshots break them, and
child tables refer only to their parent's rows of the same day."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from reflex_actions.backtest import backtest, load_history
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.demo import history
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.executor import run_control
from tests.test_demo_history import read_labels, snapshot_files

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"
NOT_NULL_CUSTOMER = parse_control_spec({"type": "not_null", "field": "customer_id"})
QUANTITY_RANGE = parse_control_spec(
    {"type": "value_range", "field": "quantity", "min": 0, "max": history.MAX_LINE_QUANTITY}
)
ORDERS = dataset_urn("sales.orders")
KNOWN_ORDER = parse_control_spec(
    {
        "type": "referential_integrity",
        "field": "order_id",
        "references": {"dataset": ORDERS, "field": "order_id"},
    }
)
AMOUNT_CONTRACT = parse_control_spec(
    {"type": "schema_contract", "columns": {"amount_minor": "BIGINT"}}
)
#: (dataset, lesson kind) -> the control its labels of that kind are about, and the incident
#: of that labelled failure
LABELLED_BY = {
    ("sales.orders", "missing_values"): (NOT_NULL_CUSTOMER, history.ORDERS_INCIDENT),
    ("sales.orders", "schema_change"): (AMOUNT_CONTRACT, history.RENAMED_COLUMN_INCIDENT),
    ("sales.invoices", "missing_values"): (NOT_NULL_CUSTOMER, None),
    ("sales.invoices", "orphaned_references"): (KNOWN_ORDER, history.INVOICES_INCIDENT),
    ("sales.order_lines", "invalid_values"): (QUANTITY_RANGE, history.ORDER_LINES_INCIDENT),
}


def flagged(control: Control, files: list[Path]) -> set[str]:
    """The snapshot ids among ``files`` that ``control`` fails."""
    con = duckdb.connect()
    try:
        return {p.stem for p in files if not run_control(control, p, connection=con).passed}
    finally:
        con.close()


@pytest.mark.parametrize(("dataset", "kind"), sorted(LABELLED_BY))
def test_labels_name_exactly_the_snapshots_the_scenario_control_flags(
    dataset: str, kind: str
) -> None:
    """Each label names its kind; that kind's control flags exactly the snapshots so labelled
    (a table that broke in two ways has a label of each kind)."""
    control, incident = LABELLED_BY[dataset, kind]
    labelled = load_history(SNAPSHOTS / dataset).labels_for(kind)
    assert [label.incident for label in labelled.values()] == [incident]
    report = backtest(
        control,
        [load_history(SNAPSHOTS / dataset)],
        references={ORDERS: load_history(SNAPSHOTS / "sales.orders")},
    )
    assert {o.snapshot_id for o in report.per_snapshot if o.flagged} == set(labelled)
    assert report.false_negatives == 0


def test_returns_are_clean_until_the_landing_day() -> None:
    files = snapshot_files(SNAPSHOTS / "sales.returns")
    assert len(files) == len(history.HISTORY_DAYS)
    assert read_labels(SNAPSHOTS / "sales.returns") == {}
    assert flagged(QUANTITY_RANGE, files) == set()


@pytest.mark.parametrize(
    ("dataset", "control"),
    [
        ("sales.invoices", NOT_NULL_CUSTOMER),
        ("sales.invoices", AMOUNT_CONTRACT),
        ("sales.returns", QUANTITY_RANGE),
    ],
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
    """No orphan on any day but those labelled orphaned references, and the order lines'
    landing (the orphaned-references scenario's incident B)."""
    columns = ", ".join(key)
    pairs = [
        (SNAPSHOTS / child / f"{day.isoformat()}.parquet", SNAPSHOTS / parent / f"{day}.parquet")
        for day in history.HISTORY_DAYS
    ]
    landed = [history.landing_snapshot(SNAPSHOTS, name) for name in (child, parent)]
    if all(path.is_file() for path in landed):  # a child lands with its parent's snapshot
        pairs.append((landed[0], landed[1]))
    broken = set(load_history(SNAPSHOTS / child).labels_for("orphaned_references"))
    if child == "sales.order_lines":
        broken.add(history.LANDING_DAY.isoformat())
    for child_file, parent_file in pairs:
        ((orphans,),) = duckdb.execute(
            f"SELECT count(*) FROM (SELECT {columns} FROM read_parquet($child) "
            f"EXCEPT SELECT {columns} FROM read_parquet($parent))",
            {"child": str(child_file), "parent": str(parent_file)},
        ).fetchall()
        assert (orphans > 0) == (child_file.stem in broken), child_file
