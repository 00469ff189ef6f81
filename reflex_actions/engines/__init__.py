"""The registered engines (entry point group ``reflex_actions.engines``).

The built-in engines are registered the same way as an engine from another package; a config
or the CLI names one, and an unknown or broken one is an error naming it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from reflex_actions.bounded import safe_excerpt
from reflex_actions.engines.base import EngineError
from reflex_actions.plugins import entry_points_in, load_plugin

if TYPE_CHECKING:
    from reflex_actions.engines.base import Engine

ENTRY_POINT_GROUP = "reflex_actions.engines"
#: The engine every file target runs on unless another is named.
DEFAULT_ENGINE = "duckdb"


def registered_engines() -> list[str]:
    return sorted(point.name for point in entry_points_in(ENTRY_POINT_GROUP))


def engine_class(name: str) -> type[Engine]:
    """The engine registered as ``name``; EngineError naming the known ones otherwise."""
    from reflex_actions.engines.base import Engine

    points = {point.name: point for point in entry_points_in(ENTRY_POINT_GROUP)}
    if name not in points:
        raise EngineError(
            f"no engine {safe_excerpt(name)}; registered: {', '.join(sorted(points))}"
        )
    return load_plugin(points[name], Engine, "engine", EngineError)


def check_settings(name: str, connection: Mapping[str, str]) -> type[Engine]:
    """The engine registered as ``name``, once ``connection`` names only settings it has;
    EngineError naming the registered engines, or the engine's settings, otherwise."""
    engine = engine_class(name)
    unknown = sorted(set(connection) - set(engine.settings_from))
    if unknown:
        raise EngineError(
            f"the {name} engine has no setting {safe_excerpt(unknown[0])}; "
            f"its settings: {', '.join(sorted(engine.settings_from)) or 'none'}"
        )
    return engine


def open_engine(
    name: str,
    connection: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Engine:
    """The engine ``name`` connected by settings read from environment variables: those
    ``connection`` names (setting -> variable), else the engine's own defaults. Only variable
    names ever appear in errors, never their values."""
    engine = engine_class(name)
    variables = dict(connection) if connection is not None else dict(engine.settings_from)
    values = os.environ if environ is None else environ
    check_settings(name, variables)
    settings = {setting: values[v] for setting, v in variables.items() if values.get(v)}
    for setting in sorted(engine.required_settings - set(settings)):
        variable = variables.get(setting, engine.settings_from[setting])
        raise EngineError(
            f"the {name} engine needs its {setting}: set the environment variable {variable}"
        )
    return engine.from_settings(settings)
