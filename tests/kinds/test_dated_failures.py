"""An incident whose history has no label of its own: the snapshot its dates point at is taken
as its failure, for the evidence and the backtest alike, and the lesson page says so."""

from __future__ import annotations

from pathlib import Path

from reflex_actions.backtest import load_history
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.lessons.facts import dated_failures
from reflex_actions.lessons.model import IncidentText
from reflex_actions.vocabulary import ROOT_CAUSE_STATUS
from tests.conftest import write_snapshot
from tests.loop.store import active_incident, demo_with_resolved, write_estate_snapshot

INCIDENT = "urn:li:incident:orders-null-customer"
ORDERS = dataset_urn("sales.orders")


def text(words: str) -> IncidentText:
    return IncidentText(urn=INCIDENT, title="Orders without a customer", description=words)


def test_the_dates_of_the_words_name_snapshots_unless_a_label_names_the_incident(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "orders"
    folder.mkdir()
    for snapshot_id in ("2026-09-13", "2026-09-14", "2026-09-14T06", "2026-09-140", "2026-09-15"):
        write_snapshot(folder / f"{snapshot_id}.parquet", [{"a": 1}])
    history = load_history(folder)
    words = "Found on 2026-09-15 (rows of 2026-09-14 had NULLs); ticket 12026-09-13."
    assert dated_failures(history, text(words)) == ["2026-09-14", "2026-09-14T06", "2026-09-15"]
    (folder / "labels.yaml").write_text("failures: [{snapshot: '2026-09-15', incident: other}]\n")
    assert dated_failures(load_history(folder), text(words)) == ["2026-09-14", "2026-09-14T06"]
    (folder / "labels.yaml").write_text(
        f"failures: [{{snapshot: '2026-09-13', incident: '{INCIDENT}'}}]\n"
    )
    assert dated_failures(load_history(folder), text(words)) == []


def write_customers(path: Path, customers: list[str | None]) -> None:
    order_ids = [f"o{i}" for i in range(len(customers))]
    write_estate_snapshot(path, "sales.orders", {"customer_id": customers, "order_id": order_ids})


def test_an_unlabelled_history_is_read_by_the_incidents_date(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    workdir.mkdir()
    folder = workdir / "snapshots" / "sales.orders"
    for day, customers in {
        "2026-09-12": ["c1", "c2"],
        "2026-09-13": ["c3", "c4", "c5"],
        "2026-09-14": ["c6", None, None],
        "2026-09-15": ["c7"],
    }.items():
        write_customers(folder / f"{day}.parquet", customers)
    incident = active_incident(
        INCIDENT,
        ORDERS,
        "Orders without a customer in sales.orders",
        "On 2026-09-14 checkout wrote orders whose customer_id was NULL.",
    )
    demo = demo_with_resolved(workdir, incident, "Backfilled the customers.")
    try:
        lesson = demo.lesson(INCIDENT)
        assert lesson.dated_failures == ["2026-09-14"]
        assert lesson.control is not None and lesson.control["field"] == "customer_id"
        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        report = demo.lesson(INCIDENT).report
        assert "| sales.orders | 4 | 1 | 0 | 3 | 0 | 0 | 100% | 100% |" in report, report
        assert (
            "Labelled as the incident's failure by its dates (labels.yaml names none of its "
            "snapshots): 2026-09-14." in report
        )
    finally:
        demo.catalog.close()
