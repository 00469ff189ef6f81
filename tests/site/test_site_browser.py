"""The static site of the demo's store, opened in a real headless browser (Debian's chromium
driven by Playwright): what a person sees, asserted on what the browser rendered.

The store is the demo's, plus one incident resolved through the real pipeline whose title and
description are hostile (markup, a cell end, a javascript: link): the lesson drafted from it
must show them as text.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.metadata.schema_classes import GlossaryTermInfoClass
from playwright.sync_api import Browser, Page, expect, sync_playwright

from reflex_actions.catalog.steward import resolve_incident
from reflex_actions.cli.site import site_command
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.metadata import incidents
from reflex_actions.demo.run import STEWARD, Demo
from reflex_actions.handlers.lesson_store import TITLE_PREFIX, lesson_urn_for
from reflex_actions.report.backtest import BAR_COLOURS
from reflex_actions.report.site import INDEX
from tests.loop.store import active_incident, latest, store_of, stored_lesson
from tests.site.png import read_png
from tests.stages import FullLoop

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HOSTILE_INCIDENT = "urn:li:incident:hostile-text"
HOSTILE_TITLE = "Duplicate rows <script>alert(1)</script> </td> [x](javascript:alert(1))"
HOSTILE_DESCRIPTION = (
    "The loader retried <script>document.title='pwned'</script> a batch </td></tr> and "
    "re-inserted transaction_id rows [click](javascript:alert(1))."
)
LESSONS = [lesson_urn_for(str(mcp.entityUrn)) for mcp in incidents()]
PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
VIEWPORT = {"width": 1100, "height": 800}


@dataclass(frozen=True)
class Site:
    store: Path
    index: Path

    def title(self, lesson: str) -> str:
        term = latest(self.store, lesson, GlossaryTermInfoClass)
        assert term is not None and term.name
        return term.name.removeprefix(TITLE_PREFIX)


@pytest.fixture(scope="module")
def site(full_loop: FullLoop, tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The demo's store with the hostile incident resolved (a lesson drafted from it), and the
    site ``datahub-reflex site`` writes of it."""
    workdir = tmp_path_factory.mktemp("site") / "demo"
    shutil.copytree(full_loop.workdir, workdir)
    demo = Demo(workdir, say=lambda _: None)
    try:
        payments = dataset_urn("finance.payments")
        demo.catalog.emit(
            [active_incident(HOSTILE_INCIDENT, payments, HOSTILE_TITLE, HOSTILE_DESCRIPTION)]
        )
        demo.react()
        resolve_incident(demo.catalog, HOSTILE_INCIDENT, "Deduplicated <b>it</b>.", STEWARD)
        demo.react()
    finally:
        demo.catalog.close()
    root = workdir / "site"
    result = CliRunner().invoke(site_command, [str(root), "--store", str(store_of(workdir))])
    assert result.exit_code == 0, result.output
    return Site(store_of(workdir), root / INDEX)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Chromium refuses to start its sandbox as root (a CI container); a user keeps it.
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        yield launched
        launched.close()


@pytest.fixture
def requested() -> list[str]:
    return []


@pytest.fixture
def page(browser: Browser, requested: list[str]) -> Iterator[Page]:
    """A fresh tab that records every address it asks for."""
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    context.on("request", lambda request: requested.append(request.url))
    opened = context.new_page()
    yield opened
    context.close()


def open_lesson(page: Page, site: Site, lesson: str) -> str:
    """From the index, follow the lesson's link; its title."""
    page.goto(site.index.as_uri())
    title = site.title(lesson)
    page.get_by_role("link", name=title, exact=True).click()
    expect(page.locator("h1")).to_have_text(title)
    return title


def test_the_index_shows_every_lesson_of_the_demo_store(page: Page, site: Site) -> None:
    page.goto(site.index.as_uri())
    for lesson in [*LESSONS, lesson_urn_for(HOSTILE_INCIDENT)]:
        expect(page.get_by_role("link", name=site.title(lesson), exact=True)).to_be_visible()
    rows = page.locator("table").first.locator("tbody tr")
    expect(rows).to_have_count(len(LESSONS) + 1)
    for row in rows.all():  # no title closed a cell or a row early
        expect(row.locator("td")).to_have_count(5)


def test_a_lesson_page_shows_its_stored_page_as_datahub_would(page: Page, site: Site) -> None:
    open_lesson(page, site, PAYMENTS_LESSON)
    lesson = stored_lesson(site.store, PAYMENTS_LESSON)
    expect(page.get_by_role("heading", name="Root cause", exact=True)).to_be_visible()
    expect(page.get_by_text(lesson.root_cause, exact=True)).to_be_visible()
    sql = page.locator("pre code", has_text='COUNT(DISTINCT "transaction_id")').first
    expect(sql).to_be_visible()
    similar = page.locator("h4:has-text('Similar assets') + table")
    expect(similar.locator("th")).to_have_text(["dataset", "score", "recommended", "why"])
    first_row = similar.locator("tbody tr").first.locator("td")
    expect(first_row).to_have_count(4)
    expect(first_row.nth(3)).not_to_be_empty()  # the reasons it is similar
    decisions = page.locator("h4:has-text('Decisions') + ul li")
    expect(decisions.filter(has_text=f"scope approved by {STEWARD}")).to_be_visible()
    assert lesson.backtest is not None
    timelines = page.locator("section.timeline svg")
    expect(timelines).to_have_count(len(lesson.backtest.datasets()))
    box = timelines.first.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100
    heights = [
        (bar.bounding_box() or {}).get("height", 0) for bar in timelines.first.locator("rect").all()
    ]
    assert max(heights) > 20, "no bar of the timeline has a rendered height"


def test_a_screenshot_of_the_lesson_page_shows_the_timeline(page: Page, site: Site) -> None:
    """The pixels where the first timeline is drawn hold its caught-failure bars' colour."""
    open_lesson(page, site, PAYMENTS_LESSON)
    timeline = page.locator("section.timeline svg").first
    timeline.scroll_into_view_if_needed()
    box = timeline.bounding_box()
    assert box is not None
    image = read_png(page.screenshot())
    left, top = int(box["x"]), int(box["y"])
    inside = image.colours_in(left, top, left + int(box["width"]), top + int(box["height"]))
    caught = tuple(int(BAR_COLOURS["true_positive"][i : i + 2], 16) for i in (1, 3, 5))
    assert inside[caught] > 200, "no caught-failure bar is drawn in the timeline's box"
    above = image.colours_in(0, 0, image.width, max(top - 40, 0))
    assert above[caught] < inside[caught]  # the bars are in the timeline, not anywhere


def test_from_a_lesson_to_a_dataset_it_runs_on_and_back(page: Page, site: Site) -> None:
    title = open_lesson(page, site, PAYMENTS_LESSON)
    page.locator("ul.scope").get_by_role("link", name="finance.card_settlements").click()
    expect(page.locator("h1")).to_have_text("finance.card_settlements")
    control = page.locator("section.control").filter(
        has=page.get_by_role("link", name=title, exact=True)
    )
    expect(control.locator("pre code")).to_contain_text('COUNT(DISTINCT "transaction_id")')
    runs = control.locator("table tbody tr")
    expect(runs.first.locator("td").nth(1)).to_have_text("SUCCESS")
    page.get_by_role("link", name="All lessons").click()
    expect(page.locator("h1")).to_have_text("DataHub Reflex: lessons")


def test_a_hostile_incident_shows_as_text_on_its_lesson_page(page: Page, site: Site) -> None:
    open_lesson(page, site, lesson_urn_for(HOSTILE_INCIDENT))
    expect(page.get_by_text(f"“{HOSTILE_DESCRIPTION}”", exact=False)).to_be_visible()
    assert page.locator("script").count() == 0
    assert page.title() == f"Lesson: {HOSTILE_TITLE}"  # no script of the page ran
    hrefs = page.locator("a").evaluate_all("links => links.map(link => link.href)")
    assert hrefs and not [href for href in hrefs if not href.startswith("file://")]


def test_the_pages_ask_for_nothing_beyond_their_own_files(
    page: Page, site: Site, requested: list[str]
) -> None:
    open_lesson(page, site, PAYMENTS_LESSON)
    page.locator("ul.scope a").first.click()
    expect(page.locator("h2", has_text="Controls")).to_be_visible()
    root = site.index.parent.as_uri()
    assert requested and all(url.startswith(root) for url in requested), requested
