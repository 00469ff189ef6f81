"""``site DIR``: a static HTML view of the embedded store, for a person to open in a browser.

It reads the lessons (their stored definitions, the pages DataHub shows), the datasets they
were published on, those datasets' assertions, recent runs and the incidents B raised there,
and writes ``DIR/index.html``, ``DIR/lessons/*.html`` and ``DIR/datasets/*.html``
(:mod:`reflex_actions.report.site` renders them), each a regular file reached through no
symlink (:mod:`reflex_actions.safe_files`). A lesson it cannot read is listed on the
index with its error; the others are still written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    AssertionRunEventClass,
    GlossaryTermInfoClass,
    IncidentInfoClass,
)

from reflex_actions.bounded import excerpt, shorten
from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.lessons import terminal_text
from reflex_actions.cli.output import print_json, reports_bad_input
from reflex_actions.cli.store import with_catalog
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.lesson_store import load_lesson, structured_values, term_title
from reflex_actions.lessons.model import Lesson
from reflex_actions.report.site import (
    DATASETS_FOLDER,
    INDEX,
    LESSONS_FOLDER,
    ControlRecord,
    DatasetRecord,
    IncidentRecord,
    LessonRecord,
    RunRecord,
    render_site,
)
from reflex_actions.safe_files import Folder
from reflex_actions.vocabulary import COVERAGE, LESSONS_NODE
from reflex_actions.wording import plural

#: Runs shown per control on a dataset's page (the newest).
RECENT_RUNS = 10
#: Longest error shown for an unreadable lesson.
MAX_ERROR_CHARS = 300


def read_lessons(catalog: LiteCatalog) -> list[LessonRecord]:
    """Every lesson term with its stored page; an unreadable one with its (bounded) error."""
    records = []
    for urn in catalog.terms_under(LESSONS_NODE):
        try:
            lesson = load_lesson(catalog, urn)
            term = catalog.get_aspect(urn, GlossaryTermInfoClass)
        except CatalogError as error:
            records.append(LessonRecord(urn=urn, error=shorten(str(error), MAX_ERROR_CHARS)))
            continue
        if lesson is None or term is None:  # a term under the node that holds no lesson
            continue
        records.append(LessonRecord(urn, term_title(term), term.definition, lesson))
    return records


def _run(event: AssertionRunEventClass) -> RunRecord:
    result = event.result
    if result is None:
        return RunRecord(at=event.timestampMillis, result=str(event.status))
    native = result.nativeResults or {}
    message = (result.error.properties or {}).get("message", "") if result.error else ""
    return RunRecord(
        at=event.timestampMillis,
        result=str(result.type),
        rows=result.rowCount,
        violations=result.unexpectedCount,
        snapshot=native.get("snapshot", ""),
        message=shorten(message, MAX_ERROR_CHARS),
    )


def _control(catalog: LiteCatalog, lesson: Lesson, dataset: str) -> ControlRecord | None:
    """The lesson's assertion on the dataset and its recent runs (None when not published)."""
    urn = assertion_urn(lesson.urn, dataset)
    info = catalog.get_aspect(urn, AssertionInfoClass)
    if info is None:
        return None
    runs = catalog.recent_timeseries(urn, AssertionRunEventClass, RECENT_RUNS)
    return ControlRecord(
        lesson=lesson.urn,
        assertion=urn,
        description=info.description or "",
        sql=(info.customAssertion.logic or "") if info.customAssertion else "",
        runs=[_run(run) for run in sorted(runs, key=lambda r: r.timestampMillis, reverse=True)],
    )


def _incidents(catalog: LiteCatalog, lessons: list[Lesson], dataset: str) -> list[IncidentRecord]:
    """The incidents B the lessons' controls raised on the dataset (their recurrences)."""
    records = []
    for lesson in lessons:
        for recurrence in lesson.recurrences:
            if recurrence.dataset != dataset:
                continue
            info = catalog.get_aspect(recurrence.incident, IncidentInfoClass)
            records.append(
                IncidentRecord(
                    urn=recurrence.incident,
                    lesson=lesson.urn,
                    title=(info.title or "") if info else "",
                    state=str(info.status.state) if info else "not in the store",
                    snapshot=recurrence.snapshot,
                    at=recurrence.at,
                )
            )
    return records


def read_datasets(catalog: LiteCatalog, lessons: list[Lesson]) -> list[DatasetRecord]:
    """Each dataset a lesson was published on or raised an incident B on (a retired lesson's
    recurrences stay on record): its coverage, controls and incidents B."""
    urns = sorted(
        {urn for lesson in lessons for urn in lesson.published_scope}
        | {recurrence.dataset for lesson in lessons for recurrence in lesson.recurrences}
    )
    records = []
    for urn in urns:
        controls = [
            control
            for lesson in lessons
            if urn in lesson.published_scope and (control := _control(catalog, lesson, urn))
        ]
        records.append(
            DatasetRecord(
                urn=urn,
                lessons=[str(value) for value in structured_values(catalog, urn, COVERAGE)],
                controls=controls,
                incidents=_incidents(catalog, lessons, urn),
            )
        )
    return records


def write_site(catalog: LiteCatalog, directory: Path) -> dict[str, Any]:
    """Write the site of the store into ``directory`` (created if needed); what was written."""
    if directory.exists() and not directory.is_dir():
        raise ReflexError(f"the site folder {excerpt(str(directory))} is a file")
    lessons = read_lessons(catalog)
    readable = [record.lesson for record in lessons if record.lesson is not None]
    datasets = read_datasets(catalog, readable)
    pages = render_site(lessons, datasets)
    try:
        with Folder(directory, create=True) as folder:
            for relative in pages:  # every page checked before the first is written
                folder.check_file(relative)
            removed = _stale_pages(folder, set(pages))
            for relative, text in pages.items():
                folder.write_file(relative, text)
            for relative in removed:
                folder.remove_file(relative)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ReflexError(f"cannot write the site to {excerpt(str(directory))}: {reason}") from None
    return {
        "index": str(directory / INDEX),
        "lessons": len(readable),
        "datasets": len(datasets),
        "removed": removed,
        "unreadable": [{"urn": r.urn, "error": r.error} for r in lessons if r.error is not None],
    }


#: A page this command writes in its lessons/ and datasets/ folders (``page_name``'s form).
_PAGE_FILE = re.compile(r"^[A-Za-z0-9._-]+-[0-9a-f]{12}\.html$")


def _stale_pages(folder: Folder, written: set[str]) -> list[str]:
    """The pages an earlier run wrote that this one does not (a dataset no longer covered):
    only regular files of this command's form, in its own folders; the others stay."""
    return [
        relative
        for subfolder in (LESSONS_FOLDER, DATASETS_FOLDER)
        for name in folder.regular_files(subfolder)
        if (relative := f"{subfolder}/{name}") not in written and _PAGE_FILE.match(name)
    ]


@click.command("site")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@reports_bad_input
@with_catalog("read", embedded_only=True)
def site_command(directory: Path, as_json: bool, catalog: LiteCatalog) -> None:
    """Write a static HTML view of the embedded store into DIRECTORY.

    An index of the lessons, each lesson's page (as its glossary term page in DataHub shows
    it, with its backtest timelines) and each covered dataset's controls and recent runs.
    Self-contained pages: open DIRECTORY/index.html in a browser. Pages an earlier run
    wrote that this one does not (a dataset no longer covered) are removed.
    """
    written = write_site(catalog, directory)
    if as_json:
        print_json(written)
        return
    removed = written["removed"]
    stale = f"; removed {plural(len(removed), 'stale page')}" if removed else ""
    click.echo(
        f"wrote the site of {plural(written['lessons'], 'lesson')} and "
        f"{plural(written['datasets'], 'dataset')}: {written['index']}{stale}"
    )
    for entry in written["unreadable"]:
        click.echo(terminal_text(f"unreadable lesson {entry['urn']}: {entry['error']}"), err=True)
