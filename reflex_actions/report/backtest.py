"""Renderings of a backtest a steward reads: markdown for the lesson page, HTML with a timeline.

Everything shown comes from the report model; text from snapshots and labels is escaped (markdown
through :mod:`reflex_actions.report.markdown`, HTML through :func:`html.escape`).
"""

from __future__ import annotations

import html

from reflex_actions.backtest.metrics import BacktestReport, Scores, SnapshotOutcome
from reflex_actions.report.markdown import escape
from reflex_actions.wording import plural

VERDICT_TEXT = {
    "true_positive": "caught (labelled failure)",
    "false_positive": "flagged, not labelled",
    "true_negative": "clean",
    "false_negative": "missed labelled failure",
    "not_evaluable": "not evaluable",
}


def ratio_text(value: float | None, scores: Scores, metric: str) -> str:
    """A precision or recall as a percentage, or n/a with why it is undefined."""
    if value is None:
        return f"n/a ({scores.undefined.get(metric, 'undefined')})"
    return f"{value:.0%}"


def render_markdown(report: BacktestReport) -> str:
    """The backtest as markdown: overall metrics, one row per dataset, problems listed."""
    c = report.coverage
    lines = [
        f"### Backtest: {escape(report.control)}",
        "",
        "| every dataset backtested | value |",
        "| --- | --- |",
        f"| precision | {ratio_text(report.precision, report, 'precision')} |",
        f"| recall | {ratio_text(report.recall, report, 'recall')} |",
        f"| true / false positives | {report.true_positives} / {report.false_positives} |",
        f"| true / false negatives | {report.true_negatives} / {report.false_negatives} |",
        f"| applicable assets | {c.applicable_assets} of {c.candidate_assets} |",
        f"| evaluable snapshots | {c.evaluable_snapshots} of {c.snapshots} |",
        f"| labelled failures visible | {c.visible_labelled_failures} of {c.labelled_failures} |",
        "",
        "| dataset | snapshots | TP | FP | TN | FN | not evaluable | precision | recall |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for d in report.datasets:
        lines.append(
            f"| {escape(d.dataset)} | {d.coverage.snapshots} | {d.true_positives} "
            f"| {d.false_positives} | {d.true_negatives} | {d.false_negatives} | {d.not_evaluable} "
            f"| {ratio_text(d.precision, d, 'precision')} | {ratio_text(d.recall, d, 'recall')} |"
        )
    notable = [o for o in report.per_snapshot if o.verdict not in ("true_negative",)]
    if notable:
        lines += [
            "",
            "| dataset | snapshot | outcome | violations | detail |",
            "| --- | --- | --- | --- | --- |",
        ]
        for o in notable:
            detail = o.reason or "; ".join(
                part
                for part in (
                    f"incident {o.incident}" if o.incident else "",
                    f"checked against {o.checked_against}" if o.checked_against else "",
                )
                if part
            )
            violations = "" if o.violation_count is None else o.violation_count
            lines.append(
                f"| {escape(o.dataset)} | {escape(o.snapshot_id)} | {VERDICT_TEXT[o.verdict]} "
                f"| {violations} | {escape(detail)} |"
            )
    lines += [
        "",
        "Timeline (one mark per snapshot, labelled failures in [ ], x not evaluable):",
        "",
    ]
    for d in report.datasets:
        outcomes = report.outcomes_for(d.dataset)
        if outcomes:
            span = f"{escape(outcomes[0].snapshot_id)} … {escape(outcomes[-1].snapshot_id)}"
            lines.append(f"- `{render_sparkline(outcomes)}` {escape(d.dataset)} ({span})")
    not_applicable = [d for d in report.datasets if not d.applicable]
    if not_applicable:
        lines += ["", "Not applicable:"]
        lines += [f"- {escape(d.dataset)}: {escape(d.reason)}" for d in not_applicable]
    unmatched = [d for d in report.datasets if d.labels_without_snapshot]
    if unmatched:  # e.g. dates given as labels of a table whose points are versions
        lines += ["", "Labels naming no snapshot of the history (not scored):"]
        lines += [f"- {escape(d.dataset)}: {_listed(d.labels_without_snapshot)}" for d in unmatched]
    return "\n".join(lines) + "\n"


#: Most snapshot ids listed in one line of the report.
MAX_LISTED = 10


def _listed(ids: list[str]) -> str:
    shown = ", ".join(escape(snapshot_id) for snapshot_id in ids[:MAX_LISTED])
    more = len(ids) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


SPARK_LEVELS = "▁▂▃▄▅▆▇█"


def render_sparkline(outcomes: list[SnapshotOutcome]) -> str:
    """Violations per snapshot as one line of text, for pages that cannot show pictures:
    ``▁`` clean, taller = more violations, ``x`` not evaluable; labelled failures in brackets."""
    peak = max((o.violation_count or 0 for o in outcomes), default=0) or 1
    marks = []
    for o in outcomes:
        if not o.evaluable:
            mark = "x"
        else:
            level = round((o.violation_count or 0) / peak * (len(SPARK_LEVELS) - 1))
            mark = SPARK_LEVELS[level]
        marks.append(f"[{mark}]" if o.labelled_failure else mark)
    return "".join(marks)


BAR_COLOURS = {
    "true_positive": "#c0392b",
    "false_positive": "#e67e22",
    "true_negative": "#7f8c8d",
    "false_negative": "#7f8c8d",
}


def _tooltip(o: SnapshotOutcome) -> str:
    text = f"{o.snapshot_id}: {VERDICT_TEXT[o.verdict]}"
    if o.violation_count is not None:
        text += f", {plural(o.violation_count, 'violation')}"
    if o.reason:
        text += f" ({o.reason})"
    return html.escape(text)


def render_timeline_svg(outcomes: list[SnapshotOutcome], title: str) -> str:
    """Violations per snapshot over time; labelled failures shaded, unevaluable ones crossed."""
    step, height, top, left = 18, 160, 28, 48
    axis = top + height
    width = left + max(len(outcomes), 1) * step + 16
    peak = max((o.violation_count or 0 for o in outcomes), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{axis + 60}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{html.escape(title)}</text>',
        f'<text x="4" y="{top + 10}" font-size="10">{peak}</text>',
        f'<text x="4" y="{axis}" font-size="10">0</text>',
        f'<line x1="{left}" y1="{axis}" x2="{width - 8}" y2="{axis}" stroke="#333"/>',
    ]
    label_every = max(1, len(outcomes) // 8)
    for index, o in enumerate(outcomes):
        x, middle, tip = left + index * step, left + index * step + step / 2, _tooltip(o)
        if o.labelled_failure:
            parts.append(
                f'<rect x="{x}" y="{top}" width="{step}" height="{height}" fill="#fadbd8">'
                f"<title>labelled failure {html.escape(o.incident or '')}</title></rect>"
                f'<text x="{middle}" y="{top - 2}" font-size="10" text-anchor="middle" '
                f'fill="#c0392b">&#9660;</text>'
            )
        if not o.evaluable:
            parts.append(
                f'<text x="{middle}" y="{axis - 4}" font-size="14" text-anchor="middle" '
                f'fill="#555"><title>{tip}</title>&#215;</text>'
            )
        else:
            bar = round((o.violation_count or 0) / peak * height, 1)
            parts.append(
                f'<rect x="{x + 3}" y="{axis - bar}" width="{step - 6}" height="{bar}" '
                f'fill="{BAR_COLOURS[o.verdict]}"><title>{tip}</title></rect>'
            )
        if index % label_every == 0:
            parts.append(
                f'<text x="{x}" y="{axis + 14}" font-size="9" '
                f'transform="rotate(35 {x} {axis + 14})">{html.escape(o.snapshot_id)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


LEGEND = (
    "<p class='legend'><span style='color:#c0392b'>&#9632;</span> caught labelled failure "
    "<span style='color:#e67e22'>&#9632;</span> flagged, not labelled "
    "<span style='background:#fadbd8'>&nbsp;&#9660;&nbsp;</span> labelled failure "
    "&#215; not evaluable</p>"
)


def render_html(report: BacktestReport) -> str:
    """A self-contained HTML page: the markdown tables, then one timeline per dataset."""
    sections = [
        f"<section><h2>{html.escape(d.dataset)}</h2>"
        + render_timeline_svg(
            report.outcomes_for(d.dataset), f"{d.dataset}: violations per snapshot"
        )
        + "</section>"
        for d in report.datasets
    ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Reflex backtest: {html.escape(report.control)}</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}"
        "pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style></head><body>"
        f"<h1>Backtest: {html.escape(report.control)}</h1>"
        f"<pre>{html.escape(render_markdown(report))}</pre>{LEGEND}{''.join(sections)}</body></html>\n"
    )
