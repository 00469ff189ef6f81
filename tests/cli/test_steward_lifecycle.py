"""``steward retire`` and ``steward rollback``: the reflex.lifecycle and reflex.version edits the
DataHub UI writes on a lesson term, checked first, which the running pipeline then acts on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.metadata.schema_classes import StructuredPropertiesClass

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.catalog import steward
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.run import STEWARD, Demo
from reflex_actions.handlers.lesson_store import lesson_term_mcp
from reflex_actions.lessons.model import KEPT_VERSIONS, LessonState
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, LIFECYCLE, VERSION
from tests.handlers.builders import LESSON, REFLEX, published_versions
from tests.loop.store import history, property_values, store_of, stored_lesson
from tests.stages import PAYMENTS_LESSON

LOOSER = "{type: uniqueness, field: transaction_id, max_duplicate_count: 5}"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(steward, list(args))
    return result.exit_code, result.output


def _writes(demo: Demo) -> list[tuple[int, StructuredPropertiesClass]]:
    return history(store_of(demo.workdir), PAYMENTS_LESSON, StructuredPropertiesClass)


@pytest.fixture
def two_versions(published: Demo) -> Demo:
    """The payments lesson with version 2 (a looser control) approved and in force."""
    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER)
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")
    approved = stored_lesson(store_of(published.workdir), PAYMENTS_LESSON).approved
    assert approved is not None and approved.number == 2
    return published


def test_retire_writes_the_lifecycle_property_the_pipeline_retires_on(published: Demo) -> None:
    store = store_of(published.workdir)

    code, output = run("retire", PAYMENTS_LESSON, "--as", "alice", "--store", str(store), "--json")

    assert code == 0, output
    assert json.loads(output) == {
        "urn": PAYMENTS_LESSON,
        "property": "reflex.lifecycle",
        "value": "RETIRED",
        "actor": STEWARD,
    }
    assert property_values(store, PAYMENTS_LESSON, LIFECYCLE) == ["RETIRED"]
    published.react()
    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.RETIRED and lesson.published_scope == []
    assert lesson.decisions[-1].decision == "retired" and lesson.decisions[-1].actor == STEWARD


def test_rollback_writes_the_version_the_pipeline_drafts_anew(two_versions: Demo) -> None:
    store = store_of(two_versions.workdir)

    code, output = run(
        "rollback", PAYMENTS_LESSON, "--to", "1", "--as", STEWARD, "--store", str(store), "--json"
    )

    assert code == 0, output
    assert json.loads(output)["value"] == 1 and json.loads(output)["property"] == "reflex.version"
    assert property_values(store, PAYMENTS_LESSON, VERSION) == [1]
    two_versions.react()
    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.revision is not None and lesson.revision.rollback_of == 1
    assert lesson.control == lesson.versions[0].control


def test_a_retired_lesson_can_be_rolled_back_to_its_last_version(published: Demo) -> None:
    store = store_of(published.workdir)
    assert run("retire", PAYMENTS_LESSON, "--as", STEWARD, "--store", str(store))[0] == 0
    published.react()

    code, output = run(
        "rollback", PAYMENTS_LESSON, "--to", "1", "--as", STEWARD, "--store", str(store)
    )

    assert code == 0, output
    published.react()
    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL and lesson.revision is not None
    assert lesson.revision.resume == "RETIRED"


@pytest.mark.parametrize(
    ("lesson", "message"),
    [
        (dataset_urn("finance.payments"), "not a lesson (glossary term) urn"),
        ("urn:li:glossaryTerm:reflex.lesson.nobody", "no lesson"),
        ("urn:li:glossaryTerm:" + "x" * 100_000, "no lesson"),
    ],
)
@pytest.mark.parametrize("command", ["retire", "rollback"])
def test_what_is_no_lesson_is_refused(
    published: Demo, lesson: str, message: str, command: str
) -> None:
    store = store_of(published.workdir)
    before = _writes(published)
    to = ["--to", "1"] if command == "rollback" else []

    code, output = run(command, lesson, *to, "--as", STEWARD, "--store", str(store))

    assert code == 2 and message in output and len(output) < 400
    assert _writes(published) == before


def test_a_lesson_never_published_cannot_be_retired_or_rolled_back(pending: Demo) -> None:
    store = store_of(pending.workdir)
    before = _writes(pending)

    code, output = run("retire", PAYMENTS_LESSON, "--as", STEWARD, "--store", str(store), "--json")
    assert code == 2
    assert json.loads(output)["error"] == (
        f"lesson {PAYMENTS_LESSON} is PENDING_APPROVAL, not published: it was never published, "
        "reject it instead"
    )
    code, output = run(
        "rollback", PAYMENTS_LESSON, "--to", "1", "--as", STEWARD, "--store", str(store)
    )
    assert code == 2 and "has no approved version to roll back to" in output
    assert _writes(pending) == before


def test_a_retired_lesson_is_not_retired_again(published: Demo) -> None:
    store = store_of(published.workdir)
    assert run("retire", PAYMENTS_LESSON, "--as", STEWARD, "--store", str(store))[0] == 0
    published.react()
    before = _writes(published)

    code, output = run("retire", PAYMENTS_LESSON, "--as", STEWARD, "--store", str(store))

    assert code == 2 and "is RETIRED, not published" in output
    assert _writes(published) == before


@pytest.mark.parametrize(
    ("to", "message"),
    [
        ("3", "has no approved version 3: choose 1 to 2"),
        ("0", "has no approved version 0: choose 1 to 2"),
        ("2", "version 2 of " + PAYMENTS_LESSON + " is already in force"),
    ],
)
def test_rollback_to_a_version_that_is_not_an_earlier_one_is_refused(
    two_versions: Demo, to: str, message: str
) -> None:
    store = store_of(two_versions.workdir)
    before = _writes(two_versions)

    code, output = run(
        "rollback", PAYMENTS_LESSON, "--to", to, "--as", STEWARD, "--store", str(store)
    )

    assert code == 2 and message in output
    assert _writes(two_versions) == before


def test_rollback_to_a_version_the_lesson_no_longer_keeps_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "reflex.db"
    catalog = LiteCatalog(store)
    catalog.emit([lesson_term_mcp(published_versions(KEPT_VERSIONS + 10), "t", REFLEX)])
    catalog.close()

    code, output = run("rollback", LESSON, "--to", "5", "--as", STEWARD, "--store", str(store))

    assert code == 2 and len(output) < 400
    kept = f"(11 to {KEPT_VERSIONS + 10})"
    assert f"version 5 is older than the versions this lesson keeps {kept}" in output
    assert history(store, LESSON, StructuredPropertiesClass) == []


def test_rollback_while_a_version_waits_for_approval_is_refused(published: Demo) -> None:
    store = store_of(published.workdir)
    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER)  # version 2 drafted
    before = _writes(published)

    code, output = run(
        "rollback", PAYMENTS_LESSON, "--to", "1", "--as", STEWARD, "--store", str(store)
    )

    assert code == 2 and "version 2 of" in output and "is waiting for approval" in output
    assert _writes(published) == before
