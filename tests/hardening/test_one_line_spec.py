"""``reflex.controlSpec`` is one line: DataHub's UI edits a single-valued string in a one-line
input that strips newlines, and what it hands back must still parse to the same control (issue
11, item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.controls import (
    Control,
    dump_control_line,
    dump_control_yaml,
    load_control_spec,
    parse_control_yaml,
)
from reflex_actions.controls.active_ownership import ActiveOwnershipControl, OwnershipColumns
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import Demo
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE_STATUS
from tests.conformance.control_cases import HOSTILE_NAMES
from tests.loop.store import property_values, store_of, stored_lesson

LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
REPO = Path(__file__).resolve().parents[2]

ODD_NAMES = [
    *HOSTILE_NAMES,
    "two\nlines",
    "tab\there",
    " padded ",
    "# not a comment",
    "key: value",
    "{braces}, [brackets]",
    "true",
    "123",
    "emoji 🎉",
    "line\u2028separator",
    "next\x85line",
]
CONTROLS: list[Control] = [
    UniquenessControl(field="transaction_id"),
    UniquenessControl(fields=["invoice_id", "line_no"], max_duplicate_count=3),
    ActiveOwnershipControl(
        min_active_owners=2,
        owner_types=["TECHNICAL_OWNER"],
        columns=OwnershipColumns(dataset="ds urn"),
    ),
    *(UniquenessControl(field=name) for name in ODD_NAMES),
    UniquenessControl(fields=ODD_NAMES[:6]),
]


def ui_edits(value: str) -> list[str]:
    """What a one-line input may hand back: newlines dropped, or turned into spaces."""
    return [value.replace("\r", "").replace("\n", ""), value.replace("\r", " ").replace("\n", " ")]


@pytest.mark.parametrize("control", CONTROLS, ids=lambda c: repr(dump_control_line(c))[:40])
def test_the_one_line_form_survives_a_one_line_edit(control: Control) -> None:
    line = dump_control_line(control)
    assert "\n" not in line and "\r" not in line and line.isprintable()
    for edited in ui_edits(line):
        assert parse_control_yaml(edited) == control
    assert parse_control_yaml(dump_control_yaml(control)) == control  # the readable form too


def test_the_one_line_form_reads_like_the_spec() -> None:
    line = dump_control_line(UniquenessControl(field="transaction_id"))
    assert line == "{type: uniqueness, field: transaction_id}"


def test_json_is_accepted_on_one_line() -> None:
    spec = '{"type": "uniqueness", "fields": ["a", "b"], "max_duplicate_count": 1}'
    assert parse_control_yaml(spec) == UniquenessControl(fields=["a", "b"], max_duplicate_count=1)


@pytest.mark.parametrize("path", sorted((REPO / "action_configs" / "controls").glob("*.yaml")))
def test_multi_line_spec_files_still_parse(path: Path) -> None:
    control = load_control_spec(path)
    assert "\n" in path.read_text().strip()
    assert parse_control_yaml(dump_control_line(control)) == control


def test_the_drafted_spec_survives_a_ui_edit_and_confirms(drafted: Demo) -> None:
    store = store_of(drafted.workdir)
    [drafted_spec] = property_values(store, LESSON, CONTROL_SPEC)
    assert isinstance(drafted_spec, str) and "\n" not in drafted_spec
    draft = stored_lesson(store, LESSON).control

    drafted.steward_sets(LESSON, CONTROL_SPEC, ui_edits(drafted_spec)[0])
    drafted.steward_sets(LESSON, ROOT_CAUSE_STATUS, "CONFIRMED")

    lesson = stored_lesson(store, LESSON)
    assert lesson.validation_error is None
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.control == draft
