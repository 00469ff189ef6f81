"""``steward suspend-user``: the corpUserStatus the DataHub UI writes when a user leaves, and
the ownership check it sets off in the running pipeline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.metadata.schema_classes import (
    AssertionResultTypeClass,
    AssertionRunEventClass,
    CorpUserStatusClass,
)

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.main import cli
from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.demo.history import OWNERSHIP_INCIDENT
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.demo.run import HR_ADMIN, OWNERSHIP_NOTE, Demo
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import APPROVAL, PROPOSED_OWNER, ROOT_CAUSE_STATUS
from tests.loop.store import history, incidents_b, latest, property_values, store_of
from tests.stages import demo_with_resolved

OWNERSHIP_LESSON = lesson_urn_for(OWNERSHIP_INCIDENT)
DAVE = user_urn("dave")
#: the covered datasets dave is the only technical owner of (the demo's orphaned pair)
ORPHANED = [dataset_urn("finance.daily_revenue"), dataset_urn("finance.invoice_lines")]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


@pytest.fixture
def ownership_published(tmp_path: Path) -> Iterator[Demo]:
    """The ownership lesson confirmed and published; dave still active."""
    demo = demo_with_resolved(tmp_path / "demo", OWNERSHIP_INCIDENT, OWNERSHIP_NOTE)
    try:
        demo.steward_sets(OWNERSHIP_LESSON, ROOT_CAUSE_STATUS, "CONFIRMED")
        demo.steward_sets(OWNERSHIP_LESSON, APPROVAL, "APPROVED")
        assert demo.lesson(OWNERSHIP_INCIDENT).state is LessonState.PUBLISHED
        yield demo
    finally:
        demo.catalog.close()


@pytest.fixture
def estate(tmp_path: Path) -> Iterator[Path]:
    """A store holding the demo estate (no pipeline)."""
    store = tmp_path / "reflex.db"
    catalog = LiteCatalog(store)
    try:
        catalog.emit([*bootstrap_mcps(), *estate_mcps()])
    finally:
        catalog.close()
    yield store


def test_suspending_an_owner_sets_off_the_ownership_check(ownership_published: Demo) -> None:
    demo = ownership_published
    store = store_of(demo.workdir)

    code, output = run("steward", "suspend-user", "dave", "--as", HR_ADMIN, "--store", str(store))

    assert code == 0, output
    status = latest(store, DAVE, CorpUserStatusClass)
    assert status is not None and status.status == "SUSPENDED"
    assert status.lastModified.actor == HR_ADMIN
    demo.react()
    for dataset in ORPHANED:
        run_event = latest(store, assertion_urn(OWNERSHIP_LESSON, dataset), AssertionRunEventClass)
        assert run_event is not None and run_event.result is not None
        assert run_event.result.type == AssertionResultTypeClass.FAILURE
        assert len(incidents_b(store, dataset)) == 1
        assert property_values(store, dataset, PROPOSED_OWNER)  # a replacement waits for approval


def test_suspending_a_suspended_user_writes_nothing(estate: Path) -> None:
    args = ("steward", "suspend-user", DAVE, "--as", "henry", "--store", str(estate), "--json")
    code, output = run(*args)
    assert code == 0 and json.loads(output) == {"urn": DAVE, "status": "SUSPENDED", "changed": True}
    written = history(estate, DAVE, CorpUserStatusClass)

    code, output = run(*args)

    assert code == 0 and json.loads(output)["changed"] is False
    assert history(estate, DAVE, CorpUserStatusClass) == written


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ("urn:li:corpGroup:finance-data", "not a user urn"),
        ("urn:li:corpuser:", "not a user urn"),
        ("nobody-here", "no user 'urn:li:corpuser:nobody-here' in the store"),
        ("x" * 100_000, "no user"),
    ],
)
def test_bad_users_exit_2_naming_them(estate: Path, user: str, message: str) -> None:
    code, output = run("steward", "suspend-user", user, "--as", "henry", "--store", str(estate))

    assert code == 2
    assert message in output
    assert len(output) < 400
    assert latest(estate, user, CorpUserStatusClass) is None
