"""``datahub-reflex backtest``: JSON contract (DESIGN.md §5), reports and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from reflex_actions.cli.main import cli
from tests.conftest import write_snapshot


def history(tmp_path: Path) -> Path:
    folder = tmp_path / "finance.ledger_entries"
    rows = [{"transaction_id": f"t{i}"} for i in range(4)]
    write_snapshot(folder / "2026-09-01.parquet", rows)
    write_snapshot(folder / "2026-09-02.csv", [*rows, rows[1]])
    write_snapshot(folder / "2026-09-03.parquet", [*rows, rows[2]])
    (folder / "labels.yaml").write_text("failures: [2026-09-02]\n")
    return folder


def spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text("type: uniqueness\nfield: transaction_id\n")
    return path


def test_json_contract(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["backtest", str(spec(tmp_path)), "--history", str(history(tmp_path)), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    for key in (
        "true_positives",
        "false_positives",
        "true_negatives",
        "false_negatives",
        "precision",
        "recall",
        "coverage",
        "per_snapshot",
    ):
        assert key in payload
    assert (payload["true_positives"], payload["false_positives"]) == (1, 1)
    assert payload["precision"] == 0.5 and payload["recall"] == 1.0
    assert [row["verdict"] for row in payload["per_snapshot"]] == [
        "true_negative",
        "true_positive",
        "false_positive",
    ]


def test_report_file_and_thresholds(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    args = ["backtest", str(spec(tmp_path)), "--history", str(history(tmp_path))]
    result = CliRunner().invoke(cli, [*args, "--report", str(report), "--min-recall", "1"])
    assert result.exit_code == 0, result.output
    assert "| precision | 50% |" in result.output
    assert "<svg" in report.read_text()
    below = CliRunner().invoke(cli, [*args, "--min-precision", "0.9"])
    assert below.exit_code == 1


def test_a_report_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.html"
    outside.write_text("theirs")
    report = tmp_path / "reports" / "r.html"
    report.parent.mkdir()
    report.symlink_to(outside)
    args = ["backtest", str(spec(tmp_path)), "--history", str(history(tmp_path))]

    result = CliRunner().invoke(cli, [*args, "--report", str(report)])

    assert result.exit_code == 2
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "r.html" in result.output and "is a symlink" in result.output
    assert outside.read_text() == "theirs" and report.is_symlink()


def test_bad_history_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["backtest", str(spec(tmp_path)), "--history", str(tmp_path / "missing"), "--json"]
    )
    assert result.exit_code == 2
    assert "history folder not found" in json.loads(result.output)["error"]
