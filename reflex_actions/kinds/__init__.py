"""The registered lesson kinds (entry point group ``reflex_actions.kinds``).

Built-in kinds are registered the same way as a kind from another package, so both are asked
the same questions. The registry is read once per process; a broken or conflicting kind is an
error that names it, not a silent omission.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from reflex_actions.errors import ReflexError
from reflex_actions.patterns import UNKNOWN_PATTERN

if TYPE_CHECKING:
    from reflex_actions.controls import Control
    from reflex_actions.kinds.base import LessonKind, Trigger

ENTRY_POINT_GROUP = "reflex_actions.kinds"


class KindError(ReflexError):
    """A kind that cannot be loaded, or a pattern or control no registered kind knows."""


@cache
def registered_kinds() -> tuple[LessonKind, ...]:
    """Every registered kind, ordered by pattern id (ties between kinds' words go to the first)."""
    from reflex_actions.kinds.base import LessonKind

    kinds: dict[str, LessonKind] = {}
    owners: dict[str, str] = {}  # control type -> pattern
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            kind_class = point.load()
        except Exception as error:
            raise KindError(
                f"lesson kind {point.name} ({point.value}) cannot load: {error}"
            ) from None
        if not (isinstance(kind_class, type) and issubclass(kind_class, LessonKind)):
            raise KindError(f"lesson kind {point.name} ({point.value}) is not a LessonKind")
        kind = kind_class()
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
    return tuple(kinds[pattern] for pattern in sorted(kinds))


def control_classes() -> dict[str, type[Control]]:
    """Every control type the registered kinds bring: a control is known through its kind."""
    return {
        control_type: control
        for kind in registered_kinds()
        for control_type, control in zip(kind.control_types(), kind.controls, strict=True)
    }


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
