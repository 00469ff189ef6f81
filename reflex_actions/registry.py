"""The registry of lesson kinds and control types: what the core asks, and none of the kinds
(entry point groups ``reflex_actions.kinds`` and ``reflex_actions.controls``).

Built-in kinds are registered the same way as a kind from another package, so both are asked
the same questions. The registry is read once per process; a broken or conflicting kind is an
error that names it, not a silent omission.

A package may also declare where each of its kinds' control types is defined (entry point group
``reflex_actions.controls``, ``type = module:Class``), so that one control spec is parsed by
loading its class alone: loading every kind (their lessons, similarity and backtest modules) to
run one control costs a `control run` most of its start-up. A type not declared there is found
among the kinds, and once the kinds are loaded every declaration must agree with them.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING

from reflex_actions.errors import ReflexError
from reflex_actions.patterns import UNKNOWN_PATTERN
from reflex_actions.plugins import entry_points_in, load_plugin

if TYPE_CHECKING:
    from reflex_actions.controls import Control
    from reflex_actions.kinds.base import LessonKind, Trigger

ENTRY_POINT_GROUP = "reflex_actions.kinds"
CONTROL_ENTRY_POINT_GROUP = "reflex_actions.controls"


class KindError(ReflexError):
    """A kind that cannot be loaded, or a pattern or control no registered kind knows."""


@cache
def registered_kinds() -> tuple[LessonKind, ...]:
    """Every registered kind, ordered by pattern id (ties between kinds' words go to the first)."""
    from reflex_actions.kinds.base import LessonKind

    kinds: dict[str, LessonKind] = {}
    owners: dict[str, str] = {}  # control type -> pattern
    for point in entry_points_in(ENTRY_POINT_GROUP):
        kind = load_plugin(point, LessonKind, "lesson kind", KindError)()
        if kind.pattern == UNKNOWN_PATTERN or kind.pattern in kinds:
            raise KindError(f"lesson kind {point.name}: pattern {kind.pattern!r} is taken")
        for control_type in kind.control_types():
            if control_type in owners:
                raise KindError(
                    f"lesson kind {point.name}: control type {control_type!r} belongs to "
                    f"{owners[control_type]!r}"
                )
            owners[control_type] = kind.pattern
        kinds[kind.pattern] = kind
    ordered = tuple(kinds[pattern] for pattern in sorted(kinds))
    _check_declared_controls(_brought_controls(ordered))
    return ordered


def _brought_controls(kinds: tuple[LessonKind, ...]) -> dict[str, type[Control]]:
    return {
        control_type: control
        for kind in kinds
        for control_type, control in zip(kind.control_types(), kind.controls, strict=True)
    }


def control_classes() -> dict[str, type[Control]]:
    """Every control type the registered kinds bring: a control is known through its kind."""
    return _brought_controls(registered_kinds())


@cache
def declared_controls() -> dict[str, EntryPoint]:
    """Control type -> where it is defined, as the installed packages declare it (read once,
    importing nothing). A package may be installed twice (an editable install beside a test's
    declarations): the same place twice is one declaration, two places an error."""
    declared: dict[str, EntryPoint] = {}
    for point in entry_points_in(CONTROL_ENTRY_POINT_GROUP):
        first = declared.setdefault(point.name, point)
        if first.value != point.value:
            raise KindError(
                f"control type {point.name} is declared twice: {first.value} and {point.value}"
            )
    return declared


@cache
def _load_declared(point: EntryPoint) -> type[Control]:
    from reflex_actions.controls.base import Control, control_type_of

    control = load_plugin(point, Control, "control type", KindError)
    if control_type_of(control) != point.name:
        raise KindError(
            f"control type {point.name} ({point.value}) parses type {control_type_of(control)!r}"
        )
    return control


def control_class(control_type: str) -> type[Control] | None:
    """The model of one control type: its declared class alone when it is declared (no kind
    is loaded), else the one a registered kind brings; None when no kind knows the type."""
    point = declared_controls().get(control_type)
    if point is None:
        return control_classes().get(control_type)
    return _load_declared(point)


def _check_declared_controls(brought: dict[str, type[Control]]) -> None:
    """Every declared control type is the class its kind brings: a declaration that no kind
    backs, or that names another class, would parse specs the kinds do not know."""
    for control_type, point in declared_controls().items():
        if control_type not in brought:
            raise KindError(
                f"control type {control_type} ({point.value}) is declared but no registered "
                "kind brings it"
            )
        if _load_declared(point) is not brought[control_type]:
            raise KindError(
                f"control type {control_type} is declared as {point.value} but its kind brings "
                f"{brought[control_type].__module__}:{brought[control_type].__qualname__}"
            )


def kind_for_pattern(pattern: str) -> LessonKind:
    for kind in registered_kinds():
        if kind.pattern == pattern:
            return kind
    known = ", ".join(kind.pattern for kind in registered_kinds())
    raise KindError(f"no lesson kind for failure pattern {pattern!r}; known: {known}")


def kind_for_control(control_type: str) -> LessonKind | None:
    """The kind whose controls include ``control_type``, if any."""
    return next((k for k in registered_kinds() if control_type in k.control_types()), None)


def triggered_by(control_type: str, trigger: Trigger) -> bool:
    """Whether a control of this type is evaluated on this kind of event."""
    kind = kind_for_control(control_type)
    return kind is not None and trigger in kind.triggers
