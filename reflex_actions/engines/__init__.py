"""The registered engines (entry point group ``reflex_actions.engines``).

The built-in engines are registered the same way as an engine from another package; a config
or the CLI names one, and an unknown or broken one is an error naming it.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from reflex_actions.engines.base import EngineError

if TYPE_CHECKING:
    from reflex_actions.engines.base import Engine

ENTRY_POINT_GROUP = "reflex_actions.engines"
#: The engine every file target runs on unless another is named.
DEFAULT_ENGINE = "duckdb"


def registered_engines() -> list[str]:
    return sorted(point.name for point in entry_points(group=ENTRY_POINT_GROUP))


def engine_class(name: str) -> type[Engine]:
    """The engine registered as ``name``; EngineError naming the known ones otherwise."""
    from reflex_actions.engines.base import Engine

    points = {point.name: point for point in entry_points(group=ENTRY_POINT_GROUP)}
    if name not in points:
        raise EngineError(f"no engine {name!r}; registered: {', '.join(sorted(points))}")
    try:
        loaded = points[name].load()
    except Exception as error:
        raise EngineError(f"engine {name} ({points[name].value}) cannot load: {error}") from None
    if not (isinstance(loaded, type) and issubclass(loaded, Engine)):
        raise EngineError(f"engine {name} ({points[name].value}) is not an Engine")
    return loaded
