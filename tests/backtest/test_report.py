"""Renderings of a backtest: markdown for the lesson page and the HTML timeline."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from reflex_actions.backtest import backtest, load_history
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.report.backtest import render_html, render_markdown, render_timeline_svg
from tests.conftest import write_snapshot

HOSTILE = "<script>alert('x')</script>|pipe"


def build(tmp_path: Path) -> Path:
    folder = tmp_path / HOSTILE.replace("/", "_")
    rows = [{"transaction_id": f"t{i}"} for i in range(5)]
    write_snapshot(folder / "2026-09-01.parquet", rows)
    write_snapshot(folder / "2026-09-02.parquet", [*rows, rows[0], rows[0]])
    write_snapshot(folder / "2026-09-03.parquet", [{"other": 1}])
    (folder / "labels.yaml").write_text(
        'failures:\n  - {snapshot: 2026-09-02, incident: "urn:li:incident:<b>"}\n'
    )
    return folder


def test_markdown_holds_metrics_rows_and_problems(tmp_path: Path) -> None:
    report = backtest(UniquenessControl(field="transaction_id"), [load_history(build(tmp_path))])
    markdown = render_markdown(report)
    assert "| precision | 100% |" in markdown
    assert "| recall | 100% |" in markdown
    assert "| evaluable snapshots | 2 of 3 |" in markdown
    assert "| 2026-09-02 | caught (labelled failure) | 2 |" in markdown
    assert "not evaluable" in markdown and "schema drift" in markdown
    # a pipe in a dataset name cannot break the table
    assert "\\|pipe" in markdown


def test_undefined_metric_is_shown_with_its_reason(tmp_path: Path) -> None:
    folder = tmp_path / "clean"
    write_snapshot(folder / "a.parquet", [{"transaction_id": "t"}])
    report = backtest(UniquenessControl(field="transaction_id"), [load_history(folder)])
    assert "| precision | n/a (nothing was flagged) |" in render_markdown(report)


def test_timeline_svg_is_well_formed_and_marks_labels_and_gaps(tmp_path: Path) -> None:
    report = backtest(UniquenessControl(field="transaction_id"), [load_history(build(tmp_path))])
    svg = render_timeline_svg(report.per_snapshot, HOSTILE)
    root = ET.fromstring(svg)  # escaping keeps it valid XML despite the hostile title
    titles = [el.text or "" for el in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith("labelled failure urn:li:incident:<b>") for t in titles)
    assert any("2026-09-03: not evaluable" in t for t in titles)
    assert any("2026-09-02: caught (labelled failure), 2 violations" in t for t in titles)
    bars = [
        el for el in root.iter("{http://www.w3.org/2000/svg}rect") if el.get("fill") == "#c0392b"
    ]
    assert len(bars) == 1 and float(bars[0].get("height")) == 160


def test_html_report_escapes_and_embeds_one_timeline_per_dataset(tmp_path: Path) -> None:
    report = backtest(UniquenessControl(field="transaction_id"), [load_history(build(tmp_path))])
    page = render_html(report)
    assert "<script>" not in page
    assert len(re.findall("<svg ", page)) == 1


def test_labels_naming_no_snapshot_are_listed_as_not_scored(tmp_path: Path) -> None:
    """A label whose id is no point of the history (a date labelling a table whose points are
    versions, a snapshot rotated out) counts for nothing: the report says so."""
    folder = build(tmp_path)
    missing = [f"2026-08-{day:02d}" for day in range(1, 13)]
    labels = "".join(f"  - '{snapshot}'\n" for snapshot in [*missing, "<i>x|y"])
    (folder / "labels.yaml").write_text("failures:\n" + labels)
    markdown = render_markdown(
        backtest(UniquenessControl(field="transaction_id"), [load_history(folder)])
    )
    (line,) = [line for line in markdown.splitlines() if "2026-08-01" in line]
    assert "2026-08-10 and 3 more" in line  # ten listed: the eleventh, the twelfth and <i>x|y
    assert "Labels naming no snapshot of the history (not scored):" in markdown
