"""Backtests of one control run apart (one per engine) merge into the report one backtest over
all their histories would have given: its scores are those of every outcome together."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.history import History
from reflex_actions.backtest.merge import merge_reports
from reflex_actions.controls.uniqueness import UniquenessControl
from tests.conftest import write_snapshot

TXN = UniquenessControl(field="transaction_id")
#: every report but its timings, which no two runs share
TIMINGS = {"elapsed_ms": True, "datasets": {"__all__": {"elapsed_ms"}}}


def history(folder: Path, snapshots: dict[str, list[str]], labels: str) -> History:
    for snapshot_id, ids in snapshots.items():
        write_snapshot(folder / f"{snapshot_id}.parquet", [{"transaction_id": i} for i in ids])
    (folder / "labels.yaml").write_text(labels)
    return load_history(folder)


@pytest.fixture
def two_histories(tmp_path: Path) -> tuple[History, History]:
    payments = history(
        tmp_path / "finance.payments",
        {"2026-09-01": ["t0", "t1"], "2026-09-02": ["t0", "t0"], "2026-09-03": ["t2", "t2"]},
        "failures: [2026-09-02]\n",  # caught; 09-03 a false alarm
    )
    write_snapshot(tmp_path / "finance.ledger" / "2026-09-03.parquet", [{"ref": "x"}])  # drifted
    ledger = history(
        tmp_path / "finance.ledger",
        {"2026-09-01": ["l0"], "2026-09-02": ["l1", "l1"]},
        "failures: [2026-09-01]\n",  # missed; 09-02 a false alarm
    )
    return payments, ledger


def test_merged_reports_score_every_outcome_as_one_backtest_does(
    two_histories: tuple[History, History],
) -> None:
    payments, ledger = two_histories
    apart = [backtest(TXN, [payments], workers=1), backtest(TXN, [ledger], workers=1)]

    merged = merge_reports(apart)

    together = backtest(TXN, [payments, ledger], workers=1)
    assert merged.model_dump(exclude=TIMINGS) == together.model_dump(exclude=TIMINGS)
    counts = (merged.true_positives, merged.false_positives, merged.false_negatives)
    assert counts == (1, 2, 1) and merged.not_evaluable == 1
    assert (merged.precision, merged.recall) == (0.3333, 0.5)
    assert merged.coverage.candidate_assets == 2 and merged.coverage.snapshots == 6
    assert merged.elapsed_ms == pytest.approx(sum(report.elapsed_ms for report in apart))


def test_reports_of_different_controls_do_not_merge(
    two_histories: tuple[History, History],
) -> None:
    payments, ledger = two_histories
    other = UniquenessControl(field="ref")
    with pytest.raises(ValueError, match="backtests of one control"):
        merge_reports([backtest(TXN, [payments]), backtest(other, [ledger])])
