"""Exact backtest metrics on small hand-labelled histories."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.history import HistoryError, LearningSplit
from reflex_actions.backtest.metrics import (
    BacktestReport,
    Coverage,
    DatasetBacktest,
    Scores,
    SnapshotOutcome,
    in_sample_ids,
    learning_split_scores,
)
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


# --- the metrics on hand-made outcomes (issue 28 item 9) ----------------------------------------


def _outcome(dataset: str, snapshot_id: str, verdict: str) -> SnapshotOutcome:
    evaluable = verdict != "not_evaluable"
    return SnapshotOutcome(
        dataset=dataset,
        snapshot_id=snapshot_id,
        path=f"{dataset}/{snapshot_id}.parquet",
        labelled_failure=verdict in ("true_positive", "false_negative", "not_evaluable"),
        evaluable=evaluable,
        flagged=verdict in ("true_positive", "false_positive") if evaluable else None,
        verdict=verdict,  # type: ignore[arg-type]
    )


def test_a_verdict_is_the_flag_against_the_label() -> None:
    assert SnapshotOutcome.verdict_for(flagged=True, labelled_failure=True) == "true_positive"
    assert SnapshotOutcome.verdict_for(flagged=True, labelled_failure=False) == "false_positive"
    assert SnapshotOutcome.verdict_for(flagged=False, labelled_failure=True) == "false_negative"
    assert SnapshotOutcome.verdict_for(flagged=False, labelled_failure=False) == "true_negative"


def test_scores_count_each_verdict_and_round_precision_and_recall() -> None:
    verdicts = ["true_positive"] * 2 + ["false_positive"] + ["true_negative"] * 4
    verdicts += ["false_negative"] * 5 + ["not_evaluable"] * 3
    outcomes = [_outcome("a", f"s{i}", v) for i, v in enumerate(verdicts)]
    scores = Scores.model_validate(
        Scores.compute(outcomes, candidate_assets=3, applicable_assets=2)
    )
    counts = (scores.true_positives, scores.false_positives, scores.true_negatives,
              scores.false_negatives, scores.not_evaluable)  # fmt: skip
    assert counts == (2, 1, 4, 5, 3)
    assert (scores.precision, scores.recall, scores.undefined) == (0.6667, 0.2857, {})
    assert scores.coverage == Coverage(
        candidate_assets=3,
        applicable_assets=2,
        snapshots=15,
        evaluable_snapshots=12,
        labelled_failures=10,
        visible_labelled_failures=7,
    )


def test_a_metric_with_nothing_to_count_is_undefined_with_its_reason() -> None:
    nothing_flagged = Scores.compute([_outcome("a", "s1", "false_negative")], 1, 1)
    assert (nothing_flagged["precision"], nothing_flagged["recall"]) == (None, 0.0)
    assert nothing_flagged["undefined"] == {"precision": "nothing was flagged"}
    no_failure = Scores.compute([_outcome("a", "s1", "false_positive")], 1, 1)
    assert (no_failure["precision"], no_failure["recall"]) == (0.0, None)
    assert no_failure["undefined"] == {
        "recall": "no labelled failure among the evaluable snapshots"
    }
    perfect = Scores.compute([_outcome("a", "s1", "true_positive")], 1, 1)
    assert (perfect["precision"], perfect["recall"], perfect["undefined"]) == (1.0, 1.0, {})


def _dataset(name: str, applicable: bool, outcomes: list[SnapshotOutcome]) -> DatasetBacktest:
    return DatasetBacktest(
        **Scores.compute(outcomes, 1, int(applicable)),
        dataset=name,
        history=name,
        applicable=applicable,
        elapsed_ms=1.0,
    )


def test_a_report_scores_the_histories_asked_for_alone() -> None:
    a = [_outcome("a", "s1", "true_positive"), _outcome("a", "s2", "false_positive")]
    b = [_outcome("b", "s1", "false_negative")]
    c = [_outcome("c", "s1", "true_negative")]
    report = BacktestReport(
        **Scores.compute([*a, *b, *c], 3, 2),
        control_type="uniqueness",
        control="t",
        spec={},
        datasets=[_dataset("a", True, a), _dataset("b", True, b), _dataset("c", False, c)],
        per_snapshot=[*a, *b, *c],
        elapsed_ms=1.0,
    )
    assert report.outcomes_for("a") == a and report.outcomes_for("z") == []
    scoped = report.scores_on({"a", "c"})
    assert (scoped.true_positives, scoped.false_positives, scoped.false_negatives) == (1, 1, 0)
    assert (scoped.coverage.candidate_assets, scoped.coverage.applicable_assets) == (2, 1)
    assert scoped.coverage.snapshots == 3 and scoped.precision == 0.5


def test_the_learning_split_scores_in_sample_and_held_out_apart() -> None:
    learned = LearningSplit(dataset="a", normal=["s1"], failures=["s2"], held_out=["s3"])
    assert in_sample_ids(learned) == {("a", "s1"), ("a", "s2")}
    outcomes = [
        _outcome("a", "s1", "true_negative"),
        _outcome("a", "s2", "true_positive"),
        _outcome("a", "s3", "false_positive"),
        _outcome("b", "s1", "not_evaluable"),  # another dataset's s1 is held out
        _outcome("c", "s1", "false_negative"),
    ]
    split = learning_split_scores(outcomes, learned)
    assert (split.in_sample.true_positives, split.in_sample.true_negatives) == (1, 1)
    assert split.in_sample.coverage.snapshots == 2
    assert (split.in_sample.coverage.candidate_assets,
            split.in_sample.coverage.applicable_assets) == (1, 1)  # fmt: skip
    held_out = split.held_out
    assert (held_out.false_positives, held_out.false_negatives, held_out.not_evaluable) == (1, 1, 1)
    assert (held_out.coverage.candidate_assets, held_out.coverage.applicable_assets) == (3, 2)
