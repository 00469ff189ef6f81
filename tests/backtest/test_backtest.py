"""Exact backtest metrics on small hand-labelled histories."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.history import HistoryError
from reflex_actions.controls.active_ownership import ActiveOwnershipControl
from reflex_actions.controls.uniqueness import UniquenessControl
from tests.conftest import write_snapshot

TXN = UniquenessControl(field="transaction_id")


def txn_rows(n: int, duplicated: int = 0) -> list[dict]:
    rows = [{"transaction_id": f"t{i}", "amount": i} for i in range(n)]
    return rows + rows[:duplicated]


def make_history(folder: Path, snapshots: dict[str, list[dict]], labels: str | None) -> Path:
    for name, rows in snapshots.items():
        write_snapshot(folder / name, rows)
    if labels is not None:
        (folder / "labels.yaml").write_text(labels)
    return folder


@pytest.fixture
def mixed_history(tmp_path: Path) -> Path:
    """Parquet and CSV mixed; one caught, one missed, one false alarm, one drifted, one corrupt."""
    folder = make_history(
        tmp_path / "finance.payments",
        {
            "2026-09-01.parquet": txn_rows(20),
            "2026-09-02.csv": txn_rows(20, duplicated=3),  # caught
            "2026-09-03.parquet": txn_rows(20),  # labelled, but clean: missed
            "2026-09-04.parquet": txn_rows(20, duplicated=1),  # not labelled: false positive
            "2026-09-05.csv": txn_rows(20),
            "2026-09-06.parquet": [{"txn_ref": "x"}],  # drifted, labelled
        },
        "failures:\n"
        "  - 2026-09-02\n"
        "  - {snapshot: 2026-09-03, incident: 'urn:li:incident:42'}\n"
        "  - 2026-09-06\n"
        "  - 2026-08-01\n",
    )
    (folder / "2026-09-07.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    return folder


def test_exact_metrics_on_a_mixed_history(mixed_history: Path) -> None:
    report = backtest(TXN, [load_history(mixed_history)])
    verdicts = {o.snapshot_id: o.verdict for o in report.per_snapshot}
    assert verdicts == {
        "2026-09-01": "true_negative",
        "2026-09-02": "true_positive",
        "2026-09-03": "false_negative",
        "2026-09-04": "false_positive",
        "2026-09-05": "true_negative",
        "2026-09-06": "not_evaluable",
        "2026-09-07": "not_evaluable",
    }
    assert (report.true_positives, report.false_positives) == (1, 1)
    assert (report.true_negatives, report.false_negatives) == (2, 1)
    assert report.not_evaluable == 2
    assert report.precision == 0.5
    assert report.recall == 0.5
    coverage = report.coverage
    assert (coverage.snapshots, coverage.evaluable_snapshots) == (7, 5)
    assert (coverage.labelled_failures, coverage.visible_labelled_failures) == (3, 2)
    by_id = {o.snapshot_id: o for o in report.per_snapshot}
    assert by_id["2026-09-02"].violation_count == 3
    assert by_id["2026-09-02"].sample[0]["occurrences"] == 2
    assert by_id["2026-09-03"].incident == "urn:li:incident:42"
    assert "schema drift" in by_id["2026-09-06"].reason
    assert "'transaction_id'" in by_id["2026-09-06"].reason
    assert "2026-09-07.parquet" in by_id["2026-09-07"].reason
    assert report.datasets[0].labels_without_snapshot == ["2026-08-01"]


def test_no_failure_history_reports_undefined_metrics_with_reasons(tmp_path: Path) -> None:
    folder = make_history(
        tmp_path / "clean", {f"2026-09-0{i}.parquet": txn_rows(5) for i in range(1, 4)}, None
    )
    report = backtest(TXN, [load_history(folder)])
    assert report.true_negatives == 3
    assert report.precision is None and report.recall is None
    assert report.undefined == {
        "precision": "nothing was flagged",
        "recall": "no labelled failure among the evaluable snapshots",
    }


def test_composite_key_backtest(tmp_path: Path) -> None:
    lines = [{"invoice_id": i // 3, "line_no": i % 3} for i in range(30)]
    folder = make_history(
        tmp_path / "finance.invoice_lines",
        {
            "d1.parquet": lines,
            "d2.parquet": [*lines, lines[4], lines[5]],
            "d3.csv": lines,
        },
        "failures: [d2]\n",
    )
    report = backtest(UniquenessControl(fields=["invoice_id", "line_no"]), [load_history(folder)])
    assert [o.violation_count for o in report.per_snapshot] == [0, 2, 0]
    assert (report.precision, report.recall) == (1.0, 1.0)
    # invoice_id alone is not a key: every snapshot would be a false alarm
    naive = backtest(UniquenessControl(field="invoice_id"), [load_history(folder)])
    assert naive.false_positives == 2 and naive.true_positives == 1
    assert naive.precision == pytest.approx(1 / 3, abs=1e-4)


def test_overall_metrics_sum_datasets_and_coverage_counts_assets(tmp_path: Path) -> None:
    payments = make_history(
        tmp_path / "payments",
        {"a.parquet": txn_rows(5, duplicated=1), "b.parquet": txn_rows(5)},
        "failures: [a]\n",
    )
    ledger = make_history(
        tmp_path / "ledger",
        {"a.parquet": txn_rows(5), "b.parquet": txn_rows(5, duplicated=2)},
        "failures: [a]\n",
    )
    unrelated = make_history(tmp_path / "fx_rates", {"a.parquet": [{"currency": "EUR"}]}, None)
    empty = tmp_path / "empty"
    empty.mkdir()
    report = backtest(TXN, [load_history(p) for p in (payments, ledger, unrelated, empty)])
    assert (report.true_positives, report.false_positives, report.false_negatives) == (1, 1, 1)
    assert report.coverage.candidate_assets == 4
    assert report.coverage.applicable_assets == 2
    by_name = {d.dataset: d for d in report.datasets}
    assert by_name["payments"].precision == 1.0
    assert by_name["ledger"].recall == 0.0
    assert not by_name["fx_rates"].applicable
    assert "schema drift" in by_name["fx_rates"].reason
    assert by_name["empty"].reason.startswith("no snapshots")


def test_empty_snapshot_file_is_evaluable_and_clean(tmp_path: Path) -> None:
    folder = make_history(tmp_path / "h", {"b.parquet": txn_rows(3)}, "failures: []\n")
    write_snapshot(folder / "a.parquet", [], columns=["transaction_id"])
    report = backtest(TXN, [load_history(folder)])
    assert [(o.evaluable, o.rows_scanned) for o in report.per_snapshot] == [(True, 0), (True, 3)]


@pytest.mark.parametrize(
    ("labels", "fragment"),
    [
        ("failures: {a: 1}\n", "failures"),
        ("failures:\n  - {snapshot: a, incidnet: x}\n", "incidnet"),
        ("fails: [a]\n", "fails"),
        ("failures: [a\n", "cannot read"),
    ],
)
def test_malformed_labels_are_named(tmp_path: Path, labels: str, fragment: str) -> None:
    folder = make_history(tmp_path / "h", {"a.parquet": txn_rows(2)}, labels)
    with pytest.raises(HistoryError, match=fragment):
        load_history(folder)


def test_missing_folder_and_ambiguous_ids_are_errors(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="not found"):
        load_history(tmp_path / "nope")
    folder = make_history(tmp_path / "h", {"a.parquet": txn_rows(2), "a.csv": txn_rows(2)}, None)
    with pytest.raises(HistoryError, match="ambiguous"):
        load_history(folder)


def test_ownership_control_on_the_ownership_history() -> None:
    """The demo's weekly ownership snapshots: every orphaning week is caught, nothing else."""
    folder = Path(__file__).resolve().parents[2] / "snapshots" / "ownership"
    history = load_history(folder)
    report = backtest(ActiveOwnershipControl(owner_types=["TECHNICAL_OWNER"]), [history])
    flagged = [o.snapshot_id for o in report.per_snapshot if o.flagged]
    assert flagged == sorted(history.labels)
    assert (report.precision, report.recall) == (1.0, 1.0)
    assert report.true_negatives == len(history.snapshots) - len(history.labels)
    first = next(o for o in report.per_snapshot if o.flagged)
    assert first.incident == "urn:li:incident:reflex-demo-orphaned-ownership"
    assert all(item["active_owners"] == 0 for item in first.sample)
