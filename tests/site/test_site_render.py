"""The static site's pages as HTML strings (no browser): what they show, link and escape."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reflex_actions.lessons.model import KEPT_RECURRENCES, Recurrence
from reflex_actions.report.site import (
    INDEX,
    ControlRecord,
    DatasetRecord,
    IncidentRecord,
    LessonRecord,
    RunRecord,
    dataset_path,
    lesson_path,
    page_name,
    render_site,
)
from tests.handlers.builders import LEDGER, LESSON, PAYMENTS
from tests.site.builders import published, record

HOSTILE = "<script>alert(1)</script> </td></tr> [x](javascript:alert(1)) <img src=x onerror=y>"


class Markup(HTMLParser):
    """The tags, attributes and text a browser would build from a page."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]

    def hrefs(self) -> list[str]:
        return [str(attrs.get("href")) for attrs in self.named("a")]

    def shown(self) -> str:
        return " ".join(" ".join(self.text).split())


@pytest.mark.parametrize(
    "urn",
    [
        LESSON,
        "urn:li:dataset:(urn:li:dataPlatform:x,../../../etc/passwd,PROD)",
        "urn:li:dataset:(urn:li:dataPlatform:x,..,PROD)",
        "urn:li:glossaryTerm:" + "/" * 50 + "\x00<>\"'|:*?\\",
        "urn:li:glossaryTerm:" + "é" * 5000,
        "",
    ],
)
def test_a_page_name_is_one_safe_file_inside_its_folder(urn: str, tmp_path: Path) -> None:
    name = page_name(urn)
    assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,120}\.html", name)
    assert (tmp_path / lesson_path(urn)).resolve().parent == (tmp_path / "lessons").resolve()


def test_distinct_urns_that_read_alike_get_distinct_pages() -> None:
    lookalikes = ["urn:li:glossaryTerm:a/b", "urn:li:glossaryTerm:a?b", "urn:li:glossaryTerm:a_b"]
    assert len({page_name(urn) for urn in lookalikes}) == len(lookalikes)


def test_the_lesson_page_is_the_stored_definition_as_a_steward_left_it() -> None:
    """A steward's edit of the definition in DataHub is what the site shows: the page renders
    the stored markdown, not a rendering of the lesson's fields."""
    stored = record(published(root_cause="the lesson's own root cause"))
    edited = LessonRecord(
        stored.urn,
        stored.title,
        "#### Root cause\nA steward's own words.\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n",
        stored.lesson,
    )
    page = Markup(render_site([edited], [])[lesson_path(LESSON)])
    assert "A steward's own words." in page.shown()
    assert "the lesson's own root cause" not in page.shown()
    assert page.named("h4") and page.named("table")


def test_the_lesson_page_shows_the_definitions_sections_and_a_timeline_per_dataset() -> None:
    page = render_site([record(published())], [])[lesson_path(LESSON)]
    markup = Markup(page)
    headings = [text for text in markup.text if text in ("Root cause", "Control", "Versions")]
    assert headings == ["Root cause", "Control"]  # published() has no approved version
    assert len(markup.named("svg")) == 2
    assert "finance.payments: violations per snapshot" in markup.shown()
    assert "finance.ledger: violations per snapshot" in markup.shown()
    assert "caught labelled failure" in markup.shown()  # the legend
    assert "<script" not in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_hostile_text_in_a_definition_shows_as_text_never_markup() -> None:
    """Raw HTML a definition holds (a steward may type anything in DataHub) is shown as text,
    and a markdown link to a javascript: address is not a link."""
    stored = record(published())
    hostile = LessonRecord(stored.urn, HOSTILE, f"{HOSTILE}\n\n[x](javascript:alert(1))", None)
    page = render_site([hostile], [])[lesson_path(LESSON)]
    markup = Markup(page)
    assert not markup.named("script") and not markup.named("img")
    assert not [href for href in markup.hrefs() if "javascript" in href]
    assert "<script>alert(1)</script>" in markup.shown()


def test_the_index_links_each_lesson_and_lists_an_unreadable_one_with_its_error() -> None:
    broken = LessonRecord("urn:li:glossaryTerm:reflex.lesson.broken", error="malformed <b>x</b>")
    pages = render_site([record(published()), broken], [])
    index = Markup(pages[INDEX])
    assert lesson_path(LESSON) in index.hrefs()
    assert "UNREADABLE" in index.shown() and "malformed <b>x</b>" in index.shown()
    assert not index.named("b")
    assert not [path for path in pages if "broken" in path]


def test_the_index_counts_every_recurrence_not_only_those_the_term_keeps() -> None:
    kept = [
        Recurrence(incident=f"urn:li:incident:reflex-{n}", dataset=PAYMENTS, snapshot="s", at=n)
        for n in range(KEPT_RECURRENCES)
    ]
    caught = published(recurrences=kept, older_recurrences=10_000 - KEPT_RECURRENCES)

    index = Markup(render_site([record(caught)], [])[INDEX])

    assert "10000" in index.text  # the recurrences cell


def covered(incident_title: str = "Recurrence on finance.payments") -> DatasetRecord:
    return DatasetRecord(
        urn=PAYMENTS,
        lessons=[LESSON, "urn:li:glossaryTerm:not-on-the-site"],
        controls=[
            ControlRecord(
                lesson=LESSON,
                assertion="urn:li:assertion:reflex-1",
                description="transaction_id identifies at most one row",
                sql='SELECT COUNT(*) FROM t WHERE "a" < 1',
                runs=[
                    RunRecord(at=1_790_000_000_000, result="FAILURE", rows=512, violations=3),
                    RunRecord(at=1_780_000_000_000, result="SUCCESS", rows=500, violations=0),
                ],
            )
        ],
        incidents=[
            IncidentRecord(
                urn="urn:li:incident:reflex-1",
                lesson=LESSON,
                title=incident_title,
                state="ACTIVE",
                snapshot="2026-10-01",
                at=1_790_000_000_000,
            )
        ],
    )


def test_the_dataset_page_shows_its_lessons_controls_runs_and_incidents() -> None:
    pages = render_site([record(published())], [covered()])
    page = Markup(pages[dataset_path(PAYMENTS)])
    shown = page.shown()
    assert f"../{lesson_path(LESSON)}" in page.hrefs()
    assert "urn:li:glossaryTerm:not-on-the-site" in shown  # named, with no page to link
    assert 'SELECT COUNT(*) FROM t WHERE "a" < 1' in shown
    assert "2026-09-21T14:13:20Z FAILURE 512 3" in shown
    assert "Recurrence on finance.payments urn:li:incident:reflex-1 ACTIVE 2026-10-01" in shown
    lesson_page = Markup(pages[lesson_path(LESSON)])
    assert f"../{dataset_path(PAYMENTS)}" in lesson_page.hrefs()
    assert f"../{INDEX}" in lesson_page.hrefs()


def test_a_lesson_links_only_the_datasets_that_have_a_page() -> None:
    pages = render_site([record(published(published_scope=[PAYMENTS, LEDGER]))], [covered()])
    hrefs = Markup(pages[lesson_path(LESSON)]).hrefs()
    assert f"../{dataset_path(PAYMENTS)}" in hrefs
    assert f"../{dataset_path(LEDGER)}" not in hrefs


def test_a_hostile_incident_title_on_a_dataset_page_is_text() -> None:
    page = render_site([], [covered(HOSTILE)])[dataset_path(PAYMENTS)]
    markup = Markup(page)
    assert not markup.named("script") and not markup.named("img")
    assert HOSTILE in markup.shown()
    cells = page.split("<td>")
    assert len(cells) == len(page.split("</td>"))  # no cell closed early by the title
