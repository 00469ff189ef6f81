"""Controls as code: ``export`` writes published lessons as stable YAML files, ``diff`` compares a
folder with the store, and ``propose`` enters a reviewed change only as a steward's edit of the
lesson's properties, which Reflex drafts as a new version waiting for approval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    StatusClass,
    StructuredPropertiesClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.controls_as_code import (
    MAX_FILE_CHARS,
    diff_command,
    export_command,
    file_name,
    propose_command,
)
from reflex_actions.demo.run import STEWARD, Demo
from reflex_actions.handlers.assertions import CONTROL_PROPERTY, assertion_urn
from reflex_actions.lessons.model import LessonState
from reflex_actions.times import iso
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, SCOPE
from tests.loop.store import all_rows, history, latest, property_values, store_of, stored_lesson
from tests.stages import PAYMENTS_LESSON

PAYMENTS_FILE = "reflex-demo-payments-duplicates.yaml"
LOOSER = {"type": "uniqueness", "field": "transaction_id", "max_duplicate_count": 5}
KEYS = [
    "lesson",
    "title",
    "kind",
    "root_cause",
    "control",
    "scope",
    "version",
    "approved_by",
    "approved_at",
    "backtest",
    "state",
]


def run(command: object, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args))  # type: ignore[arg-type]
    return result.exit_code, result.output


def export(store: Path, folder: Path) -> None:
    code, output = run(export_command, str(folder), "--store", str(store))
    assert code == 0, output


def edit(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, **changes}, sort_keys=False))


def propose(store: Path, folder: Path, *extra: str) -> tuple[int, str]:
    return run(propose_command, str(folder), "--as", STEWARD, "--store", str(store), *extra)


def test_export_writes_each_published_lesson_as_one_file(published: Demo, tmp_path: Path) -> None:
    store = store_of(published.workdir)
    lesson = stored_lesson(store, PAYMENTS_LESSON)
    approved = lesson.approved
    assert approved is not None and approved.backtest is not None

    export(store, tmp_path / "lessons")

    assert [p.name for p in (tmp_path / "lessons").iterdir()] == [PAYMENTS_FILE]
    data = yaml.safe_load((tmp_path / "lessons" / PAYMENTS_FILE).read_text())
    assert list(data) == KEYS
    assert data["lesson"] == PAYMENTS_LESSON
    assert data["kind"] == lesson.failure_pattern == "duplicate_rows_non_idempotent_retry"
    assert data["root_cause"] == lesson.root_cause
    assert data["control"] == {"type": "uniqueness", "field": "transaction_id"}
    assert data["scope"] == sorted(approved.scope) and len(data["scope"]) > 1
    assert (data["version"], data["approved_by"]) == (1, STEWARD)
    assert data["approved_at"] == iso(approved.at)
    scores = approved.backtest.scope
    assert data["backtest"] == {
        "precision": scores.precision,
        "recall": scores.recall,
        "true_positives": scores.true_positives,
        "false_positives": scores.false_positives,
        "snapshots": scores.coverage.snapshots,
    }
    assert data["state"] == "PUBLISHED"


def test_a_lesson_waiting_for_its_first_approval_is_not_exported(
    pending: Demo, tmp_path: Path
) -> None:
    export(store_of(pending.workdir), tmp_path / "lessons")

    assert list((tmp_path / "lessons").iterdir()) == []


def test_exporting_twice_writes_the_same_bytes(published: Demo, tmp_path: Path) -> None:
    store = store_of(published.workdir)
    export(store, tmp_path / "first")
    first = (tmp_path / "first" / PAYMENTS_FILE).read_bytes()

    export(store, tmp_path / "second")
    export(store, tmp_path / "first")

    assert (tmp_path / "second" / PAYMENTS_FILE).read_bytes() == first
    assert (tmp_path / "first" / PAYMENTS_FILE).read_bytes() == first


def test_export_then_propose_round_trips_with_no_change(published: Demo, tmp_path: Path) -> None:
    store = store_of(published.workdir)
    export(store, tmp_path / "lessons")
    before = all_rows(store)

    code, output = propose(store, tmp_path / "lessons", "--json")

    assert code == 0, output
    assert json.loads(output)["proposed"] == []
    assert all_rows(store) == before
    assert run(diff_command, str(tmp_path / "lessons"), "--store", str(store))[0] == 0


def test_a_proposed_control_edit_waits_for_approval_while_version_1_runs(
    published: Demo, tmp_path: Path
) -> None:
    store = store_of(published.workdir)
    ledger = stored_lesson(store, PAYMENTS_LESSON).published_scope[0]
    running = latest(store, assertion_urn(PAYMENTS_LESSON, ledger), AssertionInfoClass)
    export(store, tmp_path / "lessons")
    edit(tmp_path / "lessons" / PAYMENTS_FILE, control=LOOSER)
    before = latest(store, PAYMENTS_LESSON, StructuredPropertiesClass)
    assert before is not None

    code, output = propose(store, tmp_path / "lessons", "--json")

    assert code == 0, output
    assert [p["lesson"] for p in json.loads(output)["proposed"]] == [PAYMENTS_LESSON]
    after = latest(store, PAYMENTS_LESSON, StructuredPropertiesClass)
    assert after is not None
    changed = {
        p.propertyUrn: p
        for p in after.properties
        if p.to_obj() not in [q.to_obj() for q in before.properties]
    }
    assert set(changed) <= {CONTROL_SPEC, SCOPE} and CONTROL_SPEC in changed
    assert all(
        p.lastModified is not None and p.lastModified.actor == STEWARD for p in changed.values()
    )
    assert property_values(store, PAYMENTS_LESSON, CONTROL_SPEC) == [
        "{type: uniqueness, field: transaction_id, max_duplicate_count: 5}"
    ]
    assert published.catalog.aspect_writer(PAYMENTS_LESSON, StructuredPropertiesClass) == STEWARD

    published.react()

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL and lesson.revision is not None
    assert lesson.control == LOOSER
    assert property_values(store, PAYMENTS_LESSON, APPROVAL) == ["PENDING"]
    assert [v.number for v in lesson.versions] == [1]  # nothing published before approval
    assert latest(store, assertion_urn(PAYMENTS_LESSON, ledger), AssertionInfoClass) == running
    status = latest(store, assertion_urn(PAYMENTS_LESSON, ledger), StatusClass)
    assert status is None or not status.removed
    assert (
        running is not None
        and "max_duplicate_count" not in (running.customProperties or {})[CONTROL_PROPERTY]
    )


def test_a_stale_file_is_refused_and_nothing_is_written(published: Demo, tmp_path: Path) -> None:
    """The folder was reviewed against version 1; version 2 is in force since: the review is of
    a version that no longer runs."""
    store = store_of(published.workdir)
    export(store, tmp_path / "lessons")
    published.steward_sets(
        PAYMENTS_LESSON,
        CONTROL_SPEC,
        "{type: uniqueness, field: transaction_id, max_duplicate_count: 9}",
    )
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")
    assert stored_lesson(store, PAYMENTS_LESSON).approved.number == 2  # type: ignore[union-attr]
    edit(tmp_path / "lessons" / PAYMENTS_FILE, control=LOOSER)
    before = all_rows(store)

    code, output = propose(store, tmp_path / "lessons")

    assert code == 2
    assert "stale: the file is version 1, the version in force is 2" in output
    assert all_rows(store) == before
    code, output = run(diff_command, str(tmp_path / "lessons"), "--store", str(store), "--json")
    assert code == 1 and "stale" in json.loads(output)["lessons"][0]["problem"]


def test_one_file_that_cannot_be_proposed_stops_every_file(published: Demo, tmp_path: Path) -> None:
    store = store_of(published.workdir)
    folder = tmp_path / "lessons"
    export(store, folder)
    edit(folder / PAYMENTS_FILE, control=LOOSER)  # a good edit
    (folder / "unknown.yaml").write_text(
        (folder / PAYMENTS_FILE)
        .read_text()
        .replace(PAYMENTS_LESSON, "urn:li:glossaryTerm:reflex.lesson.nobody")
    )
    before = history(store, PAYMENTS_LESSON, StructuredPropertiesClass)

    code, output = propose(store, folder)

    assert code == 2
    assert "unknown.yaml: no lesson 'urn:li:glossaryTerm:reflex.lesson.nobody'" in output
    assert history(store, PAYMENTS_LESSON, StructuredPropertiesClass) == before


def test_a_control_the_lessons_kind_refuses_is_not_proposed(
    published: Demo, tmp_path: Path
) -> None:
    store = store_of(published.workdir)
    export(store, tmp_path / "lessons")
    edit(tmp_path / "lessons" / PAYMENTS_FILE, control={"type": "uniqueness", "field": "nope"})
    before = all_rows(store)

    code, output = propose(store, tmp_path / "lessons")

    assert code == 2 and "nope" in output
    assert all_rows(store) == before


def test_diff_names_what_a_folder_changes_and_exits_1(published: Demo, tmp_path: Path) -> None:
    store = store_of(published.workdir)
    folder = tmp_path / "lessons"
    export(store, folder)
    scope = yaml.safe_load((folder / PAYMENTS_FILE).read_text())["scope"]
    edit(folder / PAYMENTS_FILE, scope=scope[1:], approved_by="someone-else", version=1)
    before = all_rows(store)

    code, output = run(diff_command, str(folder), "--store", str(store), "--json")

    assert code == 1
    assert json.loads(output) == {
        "differs": True,
        "lessons": [
            {
                "lesson": PAYMENTS_LESSON,
                "file": PAYMENTS_FILE,
                "problem": None,
                "control": None,
                "scope_added": [],
                "scope_removed": [scope[0]],
            }
        ],
    }
    assert all_rows(store) == before
    code, output = run(diff_command, str(folder), "--store", str(store))
    assert code == 1 and f"scope - {scope[0]}" in output


def test_diff_ignores_the_record_fields_and_names_a_lesson_with_no_file(
    published: Demo, tmp_path: Path
) -> None:
    store = store_of(published.workdir)
    folder = tmp_path / "lessons"
    export(store, folder)
    edit(folder / PAYMENTS_FILE, approved_by="someone-else", backtest=None, title="renamed")

    assert run(diff_command, str(folder), "--store", str(store))[0] == 0

    (folder / PAYMENTS_FILE).unlink()
    code, output = run(diff_command, str(folder), "--store", str(store))
    assert code == 1 and f"{PAYMENTS_LESSON}: published, but no file in the folder" in output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lesson: &a x\nother: *a\n", "anchor or alias"),
        (
            "lesson: x\ncontrol: {type: uniqueness, field: a}\nscope: []\nversion: 1\nextra: 1\n",
            "unknown key 'extra'",
        ),
        (
            "lesson: x\ncontrol: {type: no_such_type}\nscope: []\nversion: 1\n",
            "unknown control type",
        ),
        ("- just a list\n", "is not a lesson file"),
        ("lesson: x\n" + "#" * MAX_FILE_CHARS, "characters long"),
    ],
)
def test_unreadable_files_exit_2_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "bad.yaml").write_text(text)
    store = tmp_path / "reflex.db"
    LiteCatalog(store).close()

    for command in (diff_command, propose_command):
        args = [str(folder), "--store", str(store)]
        code, output = run(
            command, *args, *(["--as", STEWARD] if command is propose_command else [])
        )
        assert code == 2
        assert "bad.yaml" in output and message in output
        assert len(output) < 400


def test_export_refuses_a_lesson_file_that_is_a_symlink(published: Demo, tmp_path: Path) -> None:
    """A folder checked out from a repository may hold a symlink in a lesson file's place:
    writing through it would overwrite the file it points to."""
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / PAYMENTS_FILE).symlink_to(outside)

    code, output = run(export_command, str(folder), "--store", str(store_of(published.workdir)))

    assert code == 2
    assert output.startswith("error: ") and output.count("\n") == 1
    assert PAYMENTS_FILE in output and "is a symlink" in output
    assert outside.read_text() == "theirs"
    assert [path.name for path in folder.iterdir()] == [PAYMENTS_FILE]


def test_file_names_never_lead_out_of_the_folder() -> None:
    assert file_name(PAYMENTS_LESSON) == PAYMENTS_FILE
    for urn in [
        "urn:li:glossaryTerm:reflex.lesson.../../etc/passwd",
        "urn:li:glossaryTerm:reflex.lesson..hidden",
        "urn:li:glossaryTerm:other/../../x",
    ]:
        name = file_name(urn)
        assert "/" not in name and not name.startswith(".") and name.endswith(".yaml")


def test_a_lesson_with_a_draft_waiting_exports_its_version_in_force_and_takes_no_other(
    published: Demo, tmp_path: Path
) -> None:
    store = store_of(published.workdir)
    published.steward_sets(
        PAYMENTS_LESSON,
        CONTROL_SPEC,
        "{type: uniqueness, field: transaction_id, max_duplicate_count: 9}",
    )  # version 2 drafted, waiting for approval
    folder = tmp_path / "lessons"

    export(store, folder)

    data = yaml.safe_load((folder / PAYMENTS_FILE).read_text())
    assert data["control"] == {"type": "uniqueness", "field": "transaction_id"}
    assert (data["version"], data["state"]) == (1, "PENDING_APPROVAL")
    edit(folder / PAYMENTS_FILE, control=LOOSER)
    before = all_rows(store)
    code, output = propose(store, folder)
    assert code == 2 and "version 2 is waiting for approval" in output
    assert all_rows(store) == before
