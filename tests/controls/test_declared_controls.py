"""Control types declared where they are defined (``reflex_actions.controls``): a spec of a
declared type is parsed by its class alone, any other type is found among the kinds, and a
declaration that is broken or that the kinds contradict is an error naming it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reflex_actions.controls import known_controls, parse_control_spec
from reflex_actions.controls.base import control_type_of
from reflex_actions.controls.not_null import NotNullControl
from reflex_actions.registry import KindError, control_class, registered_kinds
from tests.controls.declared import BUILT_IN
from tests.kinds.conftest import ENTRY_POINT
from tests.plugin_kinds.empty_table import RowCountMinControl


class TwinRowCountMinControl(RowCountMinControl):
    """Parses ``row_count_min`` specs, but is not the class the plugin kind brings."""


PLUGIN_CONTROL = "row_count_min = tests.plugin_kinds.empty_table:RowCountMinControl"


def test_the_built_in_declarations_are_the_classes_the_kinds_bring() -> None:
    registered_kinds()  # the kinds agree with every declaration, or this raises
    known = known_controls()
    declared = {line.split(" = ")[0] for line in BUILT_IN}
    assert declared == set(known)
    for control_type, control in known.items():
        assert control_class(control_type) is control
        assert control_type_of(control) == control_type


def test_a_type_not_declared_is_found_among_the_kinds(
    declare_controls: Callable[..., None], install_kinds: Callable[..., None]
) -> None:
    """Declarations may lag behind the kinds (a plugin kind declaring none): the kinds know."""
    declare_controls()
    install_kinds(ENTRY_POINT)
    assert isinstance(parse_control_spec({"type": "not_null", "field": "x"}), NotNullControl)
    plugin = parse_control_spec({"type": "row_count_min"})
    assert type(plugin).__module__ == "tests.plugin_kinds.empty_table"


@pytest.mark.parametrize(
    ("declarations", "named"),
    [
        (
            ["row_count_min = tests.no_such_module:Control"],
            "control type row_count_min (tests.no_such_module:Control) cannot load: No module",
        ),
        (["row_count_min = reflex_actions.kinds.base:Trigger"], "is not a Control"),
        (
            ["row_count_min = reflex_actions.controls.active_ownership:ActiveOwnershipControl"],
            "parses type 'active_ownership'",
        ),
        (
            [PLUGIN_CONTROL, f"row_count_min = {__name__}:TwinRowCountMinControl"],
            "control type row_count_min is declared twice",
        ),
    ],
    ids=["cannot-load", "not-a-control", "another-type", "declared-twice"],
)
def test_parsing_a_spec_of_a_badly_declared_type_names_the_declaration(
    declare_controls: Callable[..., None], declarations: list[str], named: str
) -> None:
    declare_controls(*declarations)
    with pytest.raises(KindError, match=named.replace("(", r"\(").replace(")", r"\)")):
        parse_control_spec({"type": "row_count_min"})


@pytest.mark.parametrize(
    ("declaration", "with_plugin_kind", "named"),
    [
        (
            PLUGIN_CONTROL,
            False,
            "control type row_count_min .* is declared but no registered kind brings it",
        ),
        (
            f"row_count_min = {__name__}:TwinRowCountMinControl",
            True,
            "control type row_count_min is declared as .*TwinRowCountMinControl but its kind "
            "brings tests.plugin_kinds.empty_table:RowCountMinControl",
        ),
    ],
    ids=["no-kind", "another-class"],
)
def test_loading_the_kinds_refuses_a_declaration_they_contradict(
    declare_controls: Callable[..., None],
    install_kinds: Callable[..., None],
    declaration: str,
    with_plugin_kind: bool,
    named: str,
) -> None:
    """Where every kind is loaded (the action's start), a declaration parsing specs the kinds
    do not know as declared is an error, as a control type claimed by two kinds is."""
    if with_plugin_kind:
        install_kinds(ENTRY_POINT)
    declare_controls(declaration)
    with pytest.raises(KindError, match=named):
        registered_kinds()
