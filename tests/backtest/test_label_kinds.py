"""Labels may name the lesson kind of their failure: another kind's failure is a normal snapshot
for a control, so a day of NULLs is not a missed orphan day, nor a day of orphans a missed NULL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.history import HistoryError
from reflex_actions.controls import parse_control_spec
from tests.conftest import write_snapshot

LABELS = {
    "failures": [
        {"snapshot": "2026-03-02", "kind": "missing_values"},
        {"snapshot": "2026-03-03", "kind": "duplicate_rows_non_idempotent_retry"},
        "2026-03-04",  # no kind: a failure for every control
    ]
}


def history(tmp_path: Path) -> Path:
    folder = tmp_path / "orders"
    folder.mkdir()
    snapshots = {
        "2026-03-01": [("o1", "c1"), ("o2", "c2")],
        "2026-03-02": [("o1", None), ("o2", "c2")],  # a NULL customer
        "2026-03-03": [("o1", "c1"), ("o1", "c1")],  # a duplicated order
        "2026-03-04": [("o1", None), ("o1", None)],  # both
    }
    for snapshot_id, rows in snapshots.items():
        write_snapshot(
            folder / f"{snapshot_id}.parquet",
            [{"order_id": order, "customer_id": customer} for order, customer in rows],
        )
    (folder / "labels.yaml").write_text(yaml.safe_dump(LABELS))
    return folder


@pytest.mark.parametrize(
    ("spec", "verdicts"),
    [
        (
            {"type": "not_null", "field": "customer_id"},
            ["true_negative", "true_positive", "true_negative", "true_positive"],
        ),
        (
            {"type": "uniqueness", "field": "order_id"},
            ["true_negative", "true_negative", "true_positive", "true_positive"],
        ),
    ],
)
def test_a_label_of_another_kind_is_a_normal_snapshot(
    tmp_path: Path, spec: dict[str, str], verdicts: list[str]
) -> None:
    report = backtest(parse_control_spec(spec), [load_history(history(tmp_path))])
    assert [outcome.verdict for outcome in report.per_snapshot] == verdicts
    assert (report.precision, report.recall) == (1.0, 1.0)


def test_a_label_kind_is_bounded(tmp_path: Path) -> None:
    folder = history(tmp_path)
    (folder / "labels.yaml").write_text(
        yaml.safe_dump({"failures": [{"snapshot": "2026-03-02", "kind": "k" * 201}]})
    )
    with pytest.raises(HistoryError, match="kind"):
        load_history(folder)


def test_a_label_naming_no_registered_kind_is_refused_naming_the_known_ones(
    tmp_path: Path,
) -> None:
    """A kind's entry point name (``duplicate_rows``) is not its pattern: such a label would
    otherwise count for no control, and its failure would score as a normal snapshot."""
    folder = history(tmp_path)
    (folder / "labels.yaml").write_text(
        yaml.safe_dump({"failures": [{"snapshot": "2026-03-03", "kind": "duplicate_rows"}]})
    )
    with pytest.raises(HistoryError, match="no lesson kind 'duplicate_rows'") as refused:
        load_history(folder)
    assert "duplicate_rows_non_idempotent_retry" in str(refused.value)


#: Backtests a uniqueness control on the folder given as its first argument in a fresh
#: process, then prints whether every kind was loaded (the stale_data kind's module).
FRESH_BACKTEST = """
import sys
from reflex_actions.backtest import backtest, load_history
from reflex_actions.controls.uniqueness import UniquenessControl
report = backtest(UniquenessControl(field="order_id"), [load_history(sys.argv[1])])
print(report.coverage.snapshots, "reflex_actions.kinds.stale_data" in sys.modules)
"""


@pytest.mark.parametrize(("named", "kinds_loaded"), [(True, True), (False, False)])
def test_the_controls_kind_is_loaded_only_when_a_label_names_a_kind(
    tmp_path: Path, named: bool, kinds_loaded: bool
) -> None:
    """Loading every registered kind costs a fresh process ~0.2 s; a history whose labels
    name no kind needs none of them."""
    folder = history(tmp_path)
    if not named:
        (folder / "labels.yaml").write_text("failures: ['2026-03-03', '2026-03-04']\n")
    done = subprocess.run(
        [sys.executable, "-c", FRESH_BACKTEST, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.split() == ["4", str(kinds_loaded)]
