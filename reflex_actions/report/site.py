"""The static site of a store's lessons: pages a person can open in a browser, no server needed.

Pure: the records in, HTML strings out (the CLI reads the store and writes the files). A lesson
page shows the term's stored definition, the markdown DataHub's glossary term page renders, never
a second rendering of the lesson; the timelines follow it. Markdown is rendered with raw HTML
disabled and every other piece of text goes through :func:`html.escape`, so text from incidents
and models shows as text. Pages are self-contained: inline CSS, no scripts, nothing fetched.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from reflex_actions.lessons.model import Lesson
from reflex_actions.report.backtest import LEGEND, render_timeline_svg
from reflex_actions.times import iso
from reflex_actions.vocabulary import display_name

INDEX = "index.html"
LESSONS_FOLDER = "lessons"
DATASETS_FOLDER = "datasets"
#: Longest readable part of a page's file name (a digest of the urn follows it).
MAX_SLUG = 80

STYLE = (
    "body{font-family:sans-serif;margin:2em auto;max-width:75em;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}pre{background:#f6f6f6;padding:1em;overflow-x:auto}"
    "code{background:#f6f6f6}nav{margin-bottom:1em}.error{color:#a00}"
    "section.timeline{margin:1em 0}"
)

#: CommonMark with GFM tables and strikethrough, raw HTML off: a ``<script>`` in a definition
#: shows as text. Its link check refuses ``javascript:`` and other unsafe schemes.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def page_name(urn: str) -> str:
    """A file name for the page of ``urn``: its readable name's safe characters, then a digest
    of the whole urn (distinct urns never share a page). No separator, no leading dot, bounded:
    joined to a folder it always names a file inside that folder."""
    slug = _UNSAFE_NAME_CHARS.sub("_", display_name(urn)).lstrip(".")[:MAX_SLUG] or "page"
    return f"{slug}-{hashlib.sha1(urn.encode()).hexdigest()[:12]}.html"


def lesson_path(urn: str) -> str:
    return f"{LESSONS_FOLDER}/{page_name(urn)}"


def dataset_path(urn: str) -> str:
    return f"{DATASETS_FOLDER}/{page_name(urn)}"


@dataclass(frozen=True)
class LessonRecord:
    """One term under the lessons node: its stored page, or why it could not be read."""

    urn: str
    title: str = ""
    #: the term's ``glossaryTermInfo.definition`` as stored (markdown)
    definition: str = ""
    lesson: Lesson | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunRecord:
    """One execution of a control (an assertion run event)."""

    at: int
    result: str
    rows: int | None = None
    violations: int | None = None
    snapshot: str = ""
    message: str = ""


@dataclass(frozen=True)
class ControlRecord:
    """A lesson's control on one dataset: its assertion and recent runs, newest first."""

    lesson: str
    assertion: str
    description: str = ""
    sql: str = ""
    runs: list[RunRecord] = field(default_factory=list)


@dataclass(frozen=True)
class IncidentRecord:
    """An incident B a lesson's control raised on a dataset."""

    urn: str
    lesson: str
    title: str
    state: str
    snapshot: str
    at: int


@dataclass(frozen=True)
class DatasetRecord:
    """A covered dataset: the lessons its ``reflex.coverage`` names, controls, incidents B."""

    urn: str
    lessons: list[str] = field(default_factory=list)
    controls: list[ControlRecord] = field(default_factory=list)
    incidents: list[IncidentRecord] = field(default_factory=list)


def render_site(lessons: list[LessonRecord], datasets: list[DatasetRecord]) -> dict[str, str]:
    """Every page of the site, by its path relative to the site's folder."""
    titles = {r.urn: r.title or display_name(r.urn) for r in lessons if r.error is None}
    with_pages = {record.urn for record in datasets}
    pages = {INDEX: render_index(lessons, datasets)}
    for record in lessons:
        if record.error is None:
            pages[lesson_path(record.urn)] = render_lesson_page(record, with_pages)
    for record in datasets:
        pages[dataset_path(record.urn)] = render_dataset_page(record, titles)
    return pages


def _page(title: str, body: str, depth: int) -> str:
    back = (
        "" if depth == 0 else f"<nav><a href='{'../' * depth}{INDEX}'>&#8592; All lessons</a></nav>"
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>{back}{body}</body></html>\n"
    )


def _link(href: str, text: str) -> str:
    return f"<a href='{html.escape(href)}'>{html.escape(text)}</a>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A table of cells that are already HTML (escaped by the caller)."""
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_index(lessons: list[LessonRecord], datasets: list[DatasetRecord]) -> str:
    """Every lesson (an unreadable one with its error) and every covered dataset."""
    rows = []
    for record in lessons:
        if record.error is not None or record.lesson is None:
            rows.append(
                [
                    html.escape(record.urn),
                    "<span class='error'>UNREADABLE</span>",
                    f"<span class='error'>{html.escape(record.error or 'no lesson')}</span>",
                    "",
                    "",
                ]
            )
            continue
        lesson = record.lesson
        rows.append(
            [
                _link(lesson_path(record.urn), record.title or display_name(record.urn)),
                html.escape(lesson.state.value),
                html.escape(lesson.failure_pattern),
                f"{lesson.published_count:,}",
                str(lesson.recurrence_count),
            ]
        )
    lesson_table = (
        _table(["lesson", "state", "pattern", "published on", "recurrences"], rows)
        if rows
        else "<p>No lessons in the store.</p>"
    )
    dataset_rows = [
        [
            _link(dataset_path(d.urn), display_name(d.urn)),
            str(len(d.lessons)),
            str(len(d.controls)),
            str(len(d.incidents)),
        ]
        for d in datasets
    ]
    dataset_table = (
        _table(["dataset", "covering lessons", "controls", "incidents raised"], dataset_rows)
        if dataset_rows
        else "<p>No dataset is covered yet.</p>"
    )
    body = (
        "<h1>DataHub Reflex: lessons</h1>"
        f"<h2>Lessons</h2>{lesson_table}<h2>Covered datasets</h2>{dataset_table}"
    )
    return _page("DataHub Reflex: lessons", body, depth=0)


def render_definition_html(definition: str) -> str:
    """The stored definition as DataHub's term page shows it: markdown, raw HTML as text."""
    return _MARKDOWN.render(definition)


def render_lesson_page(record: LessonRecord, dataset_pages: set[str]) -> str:
    """The definition, then one backtest timeline per dataset and the datasets it runs on."""
    lesson = record.lesson
    title = record.title or display_name(record.urn)
    parts = [
        f"<h1>{html.escape(title)}</h1><p><code>{html.escape(record.urn)}</code></p>",
        f"<article class='definition'>{render_definition_html(record.definition)}</article>",
    ]
    if lesson is not None and lesson.backtest is not None and lesson.backtest.outcomes:
        parts.append(f"<h2>Backtest timelines</h2>{LEGEND}")
        for dataset in lesson.backtest.datasets():
            svg = render_timeline_svg(
                lesson.backtest.outcomes_for(dataset), f"{dataset}: violations per snapshot"
            )
            parts.append(f"<section class='timeline'>{svg}</section>")
    if lesson is not None and lesson.published_scope:
        items = "".join(
            "<li>"
            + (
                _link(f"../{dataset_path(urn)}", display_name(urn))
                if urn in dataset_pages
                else html.escape(display_name(urn))
            )
            + "</li>"
            for urn in lesson.published_scope
        )
        parts.append(f"<h2>Datasets it runs on</h2><ul class='scope'>{items}</ul>")
    return _page(f"Lesson: {title}", "".join(parts), depth=1)


def _lesson_link(urn: str, titles: dict[str, str]) -> str:
    if urn in titles:
        return _link(f"../{lesson_path(urn)}", titles[urn])
    return html.escape(urn)


def _run_row(run: RunRecord) -> list[str]:
    return [
        html.escape(iso(run.at) or ""),
        html.escape(run.result),
        "" if run.rows is None else str(run.rows),
        "" if run.violations is None else str(run.violations),
        html.escape(run.snapshot),
        html.escape(run.message),
    ]


def render_dataset_page(record: DatasetRecord, titles: dict[str, str]) -> str:
    """Its covering lessons, each control (SQL, description, recent runs), its incidents B."""
    lessons = "".join(f"<li>{_lesson_link(urn, titles)}</li>" for urn in record.lessons)
    parts = [
        f"<h1>{html.escape(display_name(record.urn))}</h1>"
        f"<p><code>{html.escape(record.urn)}</code></p>",
        "<h2>Covering lessons</h2>"
        + (f"<ul>{lessons}</ul>" if lessons else "<p>No lesson covers it now.</p>"),
        "<h2>Controls</h2>",
    ]
    for control in record.controls:
        runs = (
            _table(
                ["time", "result", "rows", "violations", "snapshot", "message"],
                [_run_row(run) for run in control.runs],
            )
            if control.runs
            else "<p>No runs yet.</p>"
        )
        parts.append(
            f"<section class='control'><h3>{_lesson_link(control.lesson, titles)}</h3>"
            f"<p>{html.escape(control.description)}</p>"
            f"<p>Assertion <code>{html.escape(control.assertion)}</code></p>"
            f"<pre><code>{html.escape(control.sql)}</code></pre>"
            f"<h4>Recent runs</h4>{runs}</section>"
        )
    if not record.controls:
        parts.append("<p>No control runs on it.</p>")
    incident_rows = [
        [
            f"{html.escape(incident.title)}<br><code>{html.escape(incident.urn)}</code>",
            html.escape(incident.state),
            html.escape(incident.snapshot),
            html.escape(iso(incident.at) or ""),
            _lesson_link(incident.lesson, titles),
        ]
        for incident in record.incidents
    ]
    parts.append(
        "<h2>Incidents Reflex raised here</h2>"
        + (
            _table(["incident", "state", "snapshot", "at", "lesson"], incident_rows)
            if incident_rows
            else "<p>None.</p>"
        )
    )
    return _page(display_name(record.urn), "".join(parts), depth=1)
