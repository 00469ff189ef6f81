"""Conformance of the control library as a whole; each kind's controls are proven by its own
kind conformance module (``tests/conformance/kind_suite.py``)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import duckdb
import pytest

import tests.conformance
import tests.kinds
from reflex_actions.controls import known_controls, parse_control_spec, parse_control_yaml
from reflex_actions.errors import ControlSpecError, SnapshotUnreadableError
from reflex_actions.executor import run_control
from reflex_actions.registry import registered_kinds
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.testing.kind_suite import kind_suites
from tests.conformance.control_cases import HOSTILE_NAMES
from tests.conftest import write_snapshot


def test_every_registered_kind_passes_the_kind_suite_for_each_of_its_controls() -> None:
    for package in (tests.conformance, tests.kinds):
        for module in pkgutil.iter_modules(package.__path__):
            if module.name.startswith("test_"):
                importlib.import_module(f"{package.__name__}.{module.name}")
    covered: dict[str, set[str]] = {}
    for suite in kind_suites():
        covered.setdefault(suite.kind_pattern, set()).add(suite.control_case.type_name)
    for kind in registered_kinds():
        assert kind.pattern in covered, f"no conformance module for kind {kind.pattern}"
        assert covered[kind.pattern] == set(kind.control_types()), (
            f"kind {kind.pattern}: one conformance class per control type"
        )


def test_rejects_unknown_type_naming_it_and_the_known_ones() -> None:
    with pytest.raises(ControlSpecError) as raised:
        parse_control_yaml("type: distribution_drift\nmax_shift: 1\n")
    message = str(raised.value)
    assert "'distribution_drift'" in message
    assert all(name in message for name in known_controls())


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- type: uniqueness", "must be a mapping"),
        ("field: x", "has no 'type'"),
        ("type: uniqueness\nfield: a\nfield: b\n", "duplicate key 'field'"),
        ("type: [uniqueness", "not valid YAML"),
        ("type: 3", "unknown control type 3"),
    ],
)
def test_rejects_malformed_yaml(text: str, fragment: str) -> None:
    with pytest.raises(ControlSpecError, match=fragment.replace("[", r"\[")):
        parse_control_yaml(text)


def test_an_unsupported_snapshot_format_is_a_clear_error(tmp_path: Path) -> None:
    unsupported = tmp_path / "data.xlsx"
    unsupported.write_bytes(b"x")
    control = parse_control_spec({"type": "uniqueness", "field": "a"})
    with pytest.raises(SnapshotUnreadableError, match=r"unsupported snapshot format '\.xlsx'"):
        run_control(control, unsupported)


def test_snapshot_file_reports_its_columns(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "s.csv", [{"a": 1, HOSTILE_NAMES[0]: 2}])
    assert SnapshotFile.from_path(path).columns(duckdb.connect()) == ["a", HOSTILE_NAMES[0]]


def test_a_spec_text_is_parsed_once() -> None:
    """A sweep reads one spec from thousands of assertions: the same text gives the same
    (immutable) control without parsing again; a bad text is refused every time."""
    text = "type: uniqueness\nfield: transaction_id\n"
    assert parse_control_yaml(text) is parse_control_yaml(text)
    for _ in range(2):
        with pytest.raises(ControlSpecError, match="unknown control type"):
            parse_control_yaml("type: no_such_control\n")
