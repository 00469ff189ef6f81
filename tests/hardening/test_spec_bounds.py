"""Hostile control specs get a short ControlSpecError, and on the lesson page the lesson goes
back to PROPOSED with that error (issue 11, items 7 and 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from datahub.metadata.schema_classes import GlossaryTermInfoClass

from reflex_actions.backtest.history import HistoryError, load_history
from reflex_actions.controls import MAX_SPEC_CHARS, load_control_spec, parse_control_yaml
from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import Demo
from reflex_actions.errors import ControlSpecError
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import CONTROL_SPEC, ROOT_CAUSE_STATUS
from tests.loop.store import latest, property_values, store_of, stored_lesson

LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
#: No message about a spec may be longer than this, whatever the spec holds.
MESSAGE_LIMIT = 400


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The classic "billion laughs": each level's list repeats the previous one ``width`` times.

    It is a few hundred bytes; fully expanded it holds width**levels strings."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        items = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"l{level}: &l{level} [{items}]")
    lines.append(f"type: *l{levels - 1}")
    return "\n".join(lines) + "\n"


def deep_nesting(depth: int) -> str:
    return "type: " + "[" * depth + "]" * depth + "\n"


HOSTILE_SPECS = {
    "alias-bomb": (alias_bomb(), "anchor"),
    "one-alias": ("key: &k transaction_id\ntype: uniqueness\nfield: *k\n", "anchor"),
    "huge": ("type: uniqueness\nfield: " + "x" * 100_000 + "\n", "characters"),
    "deep-100k": (deep_nesting(100_000), "characters"),
    "deep-within-size": (deep_nesting(MAX_SPEC_CHARS // 2 - 10), "nests deeper"),
    "long-number": ("type: uniqueness\nfield: id\nmax_duplicate_count: " + "9" * 5000, "digits"),
    "unhashable-key": ("type: uniqueness\n? [a, b]\n: 1\n", "key"),
    # the same key twice with the same value: a valid spec but for the repetition
    "duplicate-key": ("type: uniqueness\nfield: id\nfield: id\n", "duplicate key 'field'"),
}


@pytest.mark.parametrize(("text", "problem"), HOSTILE_SPECS.values(), ids=HOSTILE_SPECS.keys())
def test_hostile_specs_raise_a_short_spec_error(text: str, problem: str) -> None:
    with pytest.raises(ControlSpecError) as raised:
        parse_control_yaml(text)
    message = str(raised.value)
    assert problem in message
    assert len(message) <= MESSAGE_LIMIT and "\n" not in message


def test_a_huge_spec_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("type: uniqueness\nfield: id\n# " + "x" * (10 * MAX_SPEC_CHARS) + "\n")
    with pytest.raises(ControlSpecError, match="characters") as raised:
        load_control_spec(path)
    assert len(str(raised.value)) <= MESSAGE_LIMIT + len(str(path))


LONG = "y" * 5000
ECHOING_SPECS = {
    "unknown-type": f"type: {LONG}\n",
    "unknown-key": f"type: uniqueness\nfield: id\n{LONG}: 1\n",
    "duplicate-key": f"type: uniqueness\n{LONG}: 1\n{LONG}: 2\n",
    "twice-listed": f"type: uniqueness\nfields: [{LONG}, {LONG}]\n",
    "long-column": f"type: uniqueness\nfield: {LONG}\n",
    "yaml-error": f"type: uniqueness\nfield: [{LONG}\n",
    "many-problems": "type: uniqueness\n" + "".join(f"k{i}: 1\n" for i in range(500)),
}


@pytest.mark.parametrize("text", ECHOING_SPECS.values(), ids=ECHOING_SPECS.keys())
def test_messages_never_echo_unbounded_input(text: str) -> None:
    with pytest.raises(ControlSpecError) as raised:
        parse_control_yaml(text)
    assert len(str(raised.value)) <= MESSAGE_LIMIT


NUMBERS = {
    "googol": (
        "type: uniqueness\nfield: id\nmax_duplicate_count: 1" + "0" * 100,
        "max_duplicate_count",
    ),
    "true": ("type: uniqueness\nfield: id\nmax_duplicate_count: true", "max_duplicate_count"),
    "float": ("type: uniqueness\nfield: id\nmax_duplicate_count: 2.5", "max_duplicate_count"),
    "text": ("type: uniqueness\nfield: id\nmax_duplicate_count: '3'", "max_duplicate_count"),
    "owners-true": ("type: active_ownership\nmin_active_owners: true", "min_active_owners"),
    "owners-huge": ("type: active_ownership\nmin_active_owners: 1000000", "min_active_owners"),
}


@pytest.mark.parametrize(("text", "field"), NUMBERS.values(), ids=NUMBERS.keys())
def test_numbers_in_specs_are_strict_and_bounded(text: str, field: str) -> None:
    with pytest.raises(ControlSpecError) as raised:
        parse_control_yaml(text)
    assert field in str(raised.value)
    assert len(str(raised.value)) <= MESSAGE_LIMIT


def test_sane_numbers_still_parse() -> None:
    control = parse_control_yaml("type: uniqueness\nfield: id\nmax_duplicate_count: 1000000\n")
    assert control.allowed_violations(rows_scanned=0) == 1_000_000


# --- on the lesson page -----------------------------------------------------------------------


PAGE_SPECS = {
    "alias-bomb": (alias_bomb(levels=6), "anchor"),
    "deep": (deep_nesting(MAX_SPEC_CHARS // 2 - 10), "nests deeper"),
    "huge": ("type: uniqueness\nfield: " + "x" * 100_000, "characters"),
    "googol": (
        "{type: uniqueness, field: transaction_id, max_duplicate_count: 1" + "0" * 100 + "}",
        "max_duplicate_count",
    ),
}


@pytest.mark.parametrize(("spec", "problem"), PAGE_SPECS.values(), ids=PAGE_SPECS.keys())
def test_a_hostile_spec_sends_the_lesson_back_to_proposed(
    drafted: Demo, spec: str, problem: str
) -> None:
    drafted.steward_sets(LESSON, CONTROL_SPEC, spec)
    drafted.steward_sets(LESSON, ROOT_CAUSE_STATUS, "CONFIRMED")

    store = store_of(drafted.workdir)
    lesson = stored_lesson(store, LESSON)
    assert lesson.state is LessonState.PROPOSED
    assert lesson.validation_error is not None and problem in lesson.validation_error
    assert len(lesson.validation_error) <= MESSAGE_LIMIT
    assert property_values(store, LESSON, ROOT_CAUSE_STATUS) == ["PROPOSED"]
    info = latest(store, LESSON, GlossaryTermInfoClass)
    assert info is not None and info.definition is not None
    assert lesson.validation_error in info.definition
    assert len(info.definition) < 20_000


def test_a_labels_file_with_a_yaml_bomb_is_refused_with_a_short_error(tmp_path: Path) -> None:
    """labels.yaml is read with the same bounds as a spec: aliases never expand."""
    history = tmp_path / "finance.payments"
    history.mkdir()
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    (history / "labels.yaml").write_text(bomb + "failures: [2026-09-09]\n")
    with pytest.raises(HistoryError, match="anchor or alias") as refused:
        load_history(history)
    assert len(str(refused.value)) < 300
