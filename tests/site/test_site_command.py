"""``datahub-reflex site DIR`` on the demo's store: what it writes, and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.metadata.schema_classes import (
    AssertionResultClass,
    AssertionResultTypeClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    GlossaryTermInfoClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.cli.output import EXIT_BAD_INPUT
from reflex_actions.cli.site import site_command
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.metadata import incidents
from reflex_actions.handlers.lesson_store import (
    LESSON_PROPERTY,
    lesson_urn_for,
    load_lesson,
    save_lesson,
)
from reflex_actions.lessons.model import LessonState
from reflex_actions.report.site import (
    INDEX,
    dataset_path,
    lesson_path,
    render_definition_html,
)
from reflex_actions.vocabulary import LESSONS_NODE
from tests.loop.store import latest, store_of, stored_lesson
from tests.stages import FullLoop

#: one lesson per incident A the demo resolves
DEMO_LESSONS = [lesson_urn_for(str(mcp.entityUrn)) for mcp in incidents()]
BROKEN = "urn:li:glossaryTerm:reflex.lesson.broken"
PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)


def store_copy(full_loop: FullLoop, tmp_path: Path) -> Path:
    """The demo's store, copied so that a test may change it."""
    store = tmp_path / "reflex.db"
    shutil.copy(store_of(full_loop.workdir), store)
    return store


def run_site(store: Path, directory: Path, *options: str) -> tuple[int, str]:
    result = CliRunner().invoke(site_command, [str(directory), "--store", str(store), *options])
    return result.exit_code, result.output


def test_the_site_renders_every_lesson_of_the_demo_store(
    full_loop: FullLoop, tmp_path: Path
) -> None:
    """Each lesson's page holds its stored definition rendered, as DataHub's term page shows
    it; the index links each one and each dataset a lesson was published on."""
    store = store_of(full_loop.workdir)
    code, output = run_site(store, tmp_path / "site", "--json")
    assert code == 0, output
    written = json.loads(output)
    assert written == {
        "index": str(tmp_path / "site" / INDEX),
        "lessons": len(DEMO_LESSONS),
        "datasets": written["datasets"],
        "unreadable": [],
        "removed": [],
    }
    index = (tmp_path / "site" / INDEX).read_text()
    published_on = set()
    for urn in DEMO_LESSONS:
        term = latest(store, urn, GlossaryTermInfoClass)
        assert term is not None
        page = (tmp_path / "site" / lesson_path(urn)).read_text()
        assert render_definition_html(term.definition) in page
        assert f"'{lesson_path(urn)}'" in index
        published_on |= set(stored_lesson(store, urn).published_scope)
    assert written["datasets"] == len(published_on)
    for dataset in published_on:
        assert (tmp_path / "site" / dataset_path(dataset)).is_file()
        assert f"'{dataset_path(dataset)}'" in index


def test_rewriting_the_site_removes_its_stale_pages_and_nothing_else(
    full_loop: FullLoop, tmp_path: Path
) -> None:
    """A page an earlier run wrote for a dataset no longer covered (or a lesson gone) is
    removed; a file the command never writes stays, even in its folders."""
    store = store_of(full_loop.workdir)
    site = tmp_path / "site"
    gone = "urn:li:dataset:(urn:li:dataPlatform:file,no.longer.covered,PROD)"
    stale = site / dataset_path(gone)
    stale.parent.mkdir(parents=True)
    stale.write_text("<p>a control that no longer runs</p>")
    notes = site / "datasets" / "notes.html"
    notes.write_text("mine")

    code, output = run_site(store, site, "--json")

    assert code == 0, output
    assert json.loads(output)["removed"] == [dataset_path(gone)]
    assert not stale.exists() and notes.read_text() == "mine"
    for urn in DEMO_LESSONS:
        assert (site / lesson_path(urn)).is_file()


def test_an_unreadable_lesson_is_listed_with_its_error_and_the_others_are_written(
    full_loop: FullLoop, tmp_path: Path
) -> None:
    store = store_copy(full_loop, tmp_path)
    catalog = LiteCatalog(store)
    broken = GlossaryTermInfoClass(
        definition="x",
        termSource="INTERNAL",
        parentNode=LESSONS_NODE,
        customProperties={LESSON_PROPERTY: "{not json"},
    )
    catalog.emit([acting_as("urn:li:corpuser:alice", BROKEN, broken)])
    catalog.close()
    code, output = run_site(store, tmp_path / "site", "--json")
    assert code == 0, output
    written = json.loads(output)
    assert [entry["urn"] for entry in written["unreadable"]] == [BROKEN]
    assert "malformed" in written["unreadable"][0]["error"]
    assert written["lessons"] == len(DEMO_LESSONS)
    index = (tmp_path / "site" / INDEX).read_text()
    assert "UNREADABLE" in index and BROKEN in index
    assert not (tmp_path / "site" / lesson_path(BROKEN)).exists()
    code, output = run_site(store, tmp_path / "again")
    assert code == 0 and f"unreadable lesson {BROKEN}: the lesson stored" in output


def test_a_retired_lessons_incidents_stay_on_their_datasets_pages(
    full_loop: FullLoop, tmp_path: Path
) -> None:
    """Retiring a lesson empties its published scope; the incidents B it raised are still
    shown on the datasets they were raised on."""
    store = store_copy(full_loop, tmp_path)
    catalog = LiteCatalog(store)
    lesson = load_lesson(catalog, PAYMENTS_LESSON)
    assert lesson is not None and lesson.recurrences
    retired = lesson.model_copy(update={"state": LessonState.RETIRED, "published_scope": []})
    save_lesson(catalog, retired, "urn:li:corpuser:datahub-reflex")
    catalog.close()
    code, output = run_site(store, tmp_path / "site")
    assert code == 0, output
    for recurrence in lesson.recurrences:
        page = (tmp_path / "site" / dataset_path(recurrence.dataset)).read_text()
        assert recurrence.incident in page


def test_a_site_folder_that_is_a_file_is_bad_input(full_loop: FullLoop, tmp_path: Path) -> None:
    target = tmp_path / "site.html"
    target.write_text("keep me")
    code, output = run_site(store_of(full_loop.workdir), target)
    assert code == EXIT_BAD_INPUT
    assert output.startswith("error: the site folder '")
    assert output.endswith("site.html' is a file\n")  # the path, shortened if it is long
    assert target.read_text() == "keep me"


def one_line_refusal(output: str, path: Path) -> None:
    """The refusal is one line naming the path (shortened if long) and that it is a symlink."""
    assert output.startswith("error: ") and output.count("\n") == 1
    assert path.name in output and "is a symlink" in output


@pytest.mark.parametrize("planted", ["lessons", INDEX])
def test_a_symlink_in_the_site_folder_is_refused_and_nothing_outside_is_touched(
    full_loop: FullLoop, tmp_path: Path, planted: str
) -> None:
    """A ``lessons/`` folder or a page that is a symlink would lead the writes (and the stale
    page cleanup) out of the folder: refused before any page is written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    stale_form = outside / "somebody_else-0123456789ab.html"  # a stale page's form
    stale_form.write_text("theirs")
    site = tmp_path / "site"
    site.mkdir()
    link = site / planted
    link.symlink_to(outside if planted == "lessons" else stale_form)

    code, output = run_site(store_of(full_loop.workdir), site)

    assert code == EXIT_BAD_INPUT
    one_line_refusal(output, link)
    assert list(outside.iterdir()) == [stale_form] and stale_form.read_text() == "theirs"
    assert list(site.iterdir()) == [link]  # nothing written half-way


def test_a_site_folder_that_cannot_be_created_is_bad_input(
    full_loop: FullLoop, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    code, output = run_site(store_of(full_loop.workdir), tmp_path / "a-file" / "site", "--json")
    assert code == EXIT_BAD_INPUT
    error = json.loads(output)["error"]
    assert error.startswith("cannot write the site to") and error.endswith(": Not a directory")


def run_event(at: int, result: str) -> AssertionRunEventClass:
    return AssertionRunEventClass(
        timestampMillis=at,
        runId=str(at),
        asserteeUrn="urn:li:dataset:(urn:li:dataPlatform:x,t,PROD)",
        assertionUrn="urn:li:assertion:a",
        status=AssertionRunStatusClass.COMPLETE,
        result=AssertionResultClass(type=result),
    )


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_the_embedded_store_reads_an_assertions_recent_runs_newest_first(
    tmp_path: Path, limit: int
) -> None:
    catalog = LiteCatalog(tmp_path / "reflex.db")
    runs = [
        run_event(1000, AssertionResultTypeClass.SUCCESS),
        run_event(2000, AssertionResultTypeClass.FAILURE),
        run_event(3000, AssertionResultTypeClass.SUCCESS),
    ]
    catalog.emit([acting_as("urn:li:corpuser:r", "urn:li:assertion:a", run) for run in runs])
    recent = catalog.recent_timeseries("urn:li:assertion:a", AssertionRunEventClass, limit)
    catalog.close()
    assert [run.timestampMillis for run in recent] == [3000, 2000, 1000][:limit]
