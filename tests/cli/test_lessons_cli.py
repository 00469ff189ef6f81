"""``lessons`` and ``lessons show``: the lessons in the store, and one lesson's page as
DataHub's glossary term page shows it, on the demo's embedded store at each stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import GlossaryTermInfoClass

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.main import cli
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import STEWARD, Demo
from reflex_actions.handlers.lesson_store import (
    LESSON_PREFIX,
    LESSON_PROPERTY,
    lesson_term_mcp,
    lesson_urn_for,
)
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.lessons.model import KEPT_RECURRENCES, Recurrence
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.vocabulary import LESSONS_NODE, SCOPE
from tests.conftest import write_snapshot
from tests.handlers import builders
from tests.loop.store import latest, property_values, store_of

PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
LEDGER_NAME = "finance.ledger_entries"
DUPLICATED = [
    {"transaction_id": "T1", "entry_id": "E1", "amount": 10},
    {"transaction_id": "T1", "entry_id": "E2", "amount": 10},
]
HOSTILE_TITLE = "Dupes \x1b[2J\x1b]0;pwned\x07 everywhere\nSECOND LINE"


def run(demo: Demo, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--store", str(store_of(demo.workdir))])
    return result.exit_code, result.output


def listed(demo: Demo) -> dict[str, dict[str, object]]:
    code, output = run(demo, "lessons", "--json")
    assert code == 0, output
    return {entry["urn"]: entry for entry in json.loads(output)}


def test_a_drafted_lesson_is_listed_proposed_with_no_scope(drafted: Demo) -> None:
    entry = listed(drafted)[PAYMENTS_LESSON]

    assert entry == {
        "urn": PAYMENTS_LESSON,
        "title": entry["title"],
        "state": "PROPOSED",
        "pattern": DUPLICATE_ROWS,
        "version": None,
        "draft": None,
        "scope_size": 0,
        "scope_rule": None,
        "rollout": None,
        "recurrences": 0,
    }
    assert entry["title"]


def test_a_pending_lesson_counts_the_scope_the_steward_would_approve(pending: Demo) -> None:
    scope = property_values(store_of(pending.workdir), PAYMENTS_LESSON, SCOPE)
    assert len(scope) > 1

    entry = listed(pending)[PAYMENTS_LESSON]

    assert (entry["state"], entry["scope_size"]) == ("PENDING_APPROVAL", len(scope))


def test_a_published_lesson_counts_its_published_scope_and_recurrences(published: Demo) -> None:
    lesson = published.lesson(PAYMENTS_INCIDENT)
    assert listed(published)[PAYMENTS_LESSON]["recurrences"] == 0
    landing = published.workdir / "snapshots" / "landing" / LEDGER_NAME
    snapshot = write_snapshot(landing / "2026-11-05.parquet", DUPLICATED)
    code, output = run(
        published, "steward", "land", dataset_urn(LEDGER_NAME), "--snapshot", str(snapshot)
    )
    assert code == 0, output
    published.react()

    entry = listed(published)[PAYMENTS_LESSON]

    assert (entry["state"], entry["version"], entry["draft"]) == ("PUBLISHED", 1, None)
    assert entry["scope_size"] == len(lesson.published_scope)
    assert entry["recurrences"] == 1
    code, output = run(published, "lessons")
    assert code == 0
    (line,) = [line for line in output.splitlines() if PAYMENTS_LESSON in line]
    assert line.split()[:3] == ["PUBLISHED", DUPLICATE_ROWS, "v1"]
    assert f"scope {len(lesson.published_scope)}" in line and "recurrences 1" in line


def test_show_prints_the_page_datahub_shows(published: Demo) -> None:
    term = latest(store_of(published.workdir), PAYMENTS_LESSON, GlossaryTermInfoClass)
    assert term is not None and term.name and term.definition
    lesson = published.lesson(PAYMENTS_INCIDENT)
    assert term.definition == render_definition(lesson, term.name.removeprefix("Lesson: "))

    code, output = run(published, "lessons", "show", PAYMENTS_LESSON)

    assert code == 0, output
    assert output.startswith(f"# {term.name}\n\n{term.definition}")
    assert "reflex.approval: APPROVED" in output
    code, output = run(published, "lessons", "show", PAYMENTS_LESSON, "--json")
    shown = json.loads(output)
    assert (shown["name"], shown["definition"]) == (term.name, term.definition)
    assert shown["properties"]["reflex.approval"] == ["APPROVED"]
    assert shown["lesson"]["state"] == "PUBLISHED"


def test_a_steward_edited_page_is_shown_as_edited(published: Demo) -> None:
    """Editing the term's documentation in DataHub rewrites its definition: that is the page."""
    term = latest(store_of(published.workdir), PAYMENTS_LESSON, GlossaryTermInfoClass)
    assert term is not None
    term.definition = "Edited by the steward."
    published.catalog.emit([MetadataChangeProposalWrapper(entityUrn=PAYMENTS_LESSON, aspect=term)])

    code, output = run(published, "lessons", "show", PAYMENTS_LESSON)

    assert code == 0 and "Edited by the steward." in output
    assert "#### Root cause" not in output


def test_hostile_titles_cannot_reach_the_terminal(drafted: Demo) -> None:
    lesson = drafted.lesson(PAYMENTS_INCIDENT).model_copy(update={"urn": LESSON_PREFIX + "evil"})
    drafted.catalog.emit([lesson_term_mcp(lesson, HOSTILE_TITLE, STEWARD)])

    code, output = run(drafted, "lessons")
    assert code == 0
    assert "\x1b" not in output and "\x07" not in output
    (line,) = [line for line in output.splitlines() if lesson.urn in line]
    assert "SECOND LINE" in line  # the title stays on its lesson's line

    code, output = run(drafted, "lessons", "show", lesson.urn)
    assert code == 0
    assert "\x1b" not in output and "\x07" not in output
    assert "\\x1b[2J" in output  # shown, visibly, as the text it is


def test_a_malformed_lesson_is_listed_as_unreadable_and_show_refuses_it(drafted: Demo) -> None:
    broken = LESSON_PREFIX + "broken"
    term = GlossaryTermInfoClass(
        definition="x",
        termSource="INTERNAL",
        parentNode=LESSONS_NODE,
        customProperties={LESSON_PROPERTY: '{"urn": ' + '"A' * 10_000},
    )
    drafted.catalog.emit([MetadataChangeProposalWrapper(entityUrn=broken, aspect=term)])

    entries = listed(drafted)
    assert entries[PAYMENTS_LESSON]["state"] == "PROPOSED"  # the others are still listed
    assert "malformed" in str(entries[broken]["error"])
    code, output = run(drafted, "lessons", "show", broken)
    assert code == 2 and "malformed" in output


@pytest.mark.parametrize(
    ("urn", "message"),
    [
        (LESSON_PREFIX + "nope", "no lesson"),
        (dataset_urn(LEDGER_NAME), "no lesson"),
        ("urn:li:glossaryTerm:" + "x" * 100_000, "no lesson"),
    ],
)
def test_show_refuses_what_is_no_lesson(drafted: Demo, urn: str, message: str) -> None:
    code, output = run(drafted, "lessons", "show", urn, "--json")

    assert code == 2
    assert message in json.loads(output)["error"]
    assert len(output) < 400


def test_the_listing_counts_every_recurrence_not_only_those_the_term_keeps(
    tmp_path: Path,
) -> None:
    store = tmp_path / "reflex.db"
    kept = [
        Recurrence(
            incident=f"urn:li:incident:reflex-{n}", dataset=builders.PAYMENTS, snapshot="s", at=n
        )
        for n in range(KEPT_RECURRENCES)
    ]
    caught = builders.lesson(recurrences=kept, older_recurrences=10_000 - KEPT_RECURRENCES)
    catalog = LiteCatalog(store)
    catalog.emit([lesson_term_mcp(caught, "t", builders.REFLEX)])
    catalog.close()

    result = CliRunner().invoke(cli, ["lessons", "--json", "--store", str(store)])

    assert result.exit_code == 0, result.output
    assert [entry["recurrences"] for entry in json.loads(result.output)] == [10_000]


def test_an_empty_store_lists_no_lessons(tmp_path: Path) -> None:
    store = tmp_path / "reflex.db"
    assert CliRunner().invoke(cli, ["init", "--store", str(store)]).exit_code == 0
    result = CliRunner().invoke(cli, ["lessons", "--store", str(store)])
    assert result.exit_code == 0 and "no lessons" in result.output
    result = CliRunner().invoke(cli, ["lessons", "--json", "--store", str(store)])
    assert json.loads(result.output) == []


def test_a_draft_waiting_beside_the_version_in_force_is_listed(published: Demo) -> None:
    narrowed = published.lesson(PAYMENTS_INCIDENT).published_scope[:2]
    published.catalog.set_structured_properties(PAYMENTS_LESSON, {SCOPE: narrowed}, STEWARD)
    published.react()

    entry = listed(published)[PAYMENTS_LESSON]

    assert (entry["state"], entry["version"], entry["draft"]) == ("PENDING_APPROVAL", 1, 2)
    assert entry["scope_size"] == len(narrowed)
    code, output = run(published, "lessons")
    assert code == 0
    (line,) = [line for line in output.splitlines() if PAYMENTS_LESSON in line]
    assert line.split()[2] == "v1+2"
