"""Loading a plugin class from an entry point (kinds, control types, engines, catalog stores):
one place for the refusal of a plugin that cannot load or is not what its group expects."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import TypeVar

from reflex_actions.errors import ReflexError, first_line

_Plugin = TypeVar("_Plugin")


def load_plugin(
    point: EntryPoint, base: type[_Plugin], what: str, error: type[ReflexError]
) -> type[_Plugin]:
    """The class ``point`` names, a subclass of ``base``; else ``error`` naming the plugin
    (``what`` it is, its name and where it points) and the problem."""
    try:
        loaded = point.load()
    except Exception as failure:
        raise error(
            f"{what} {point.name} ({point.value}) cannot load: {first_line(failure)}"
        ) from None
    if not (isinstance(loaded, type) and issubclass(loaded, base)):
        article = "an" if base.__name__[0] in "AEIOU" else "a"
        raise error(f"{what} {point.name} ({point.value}) is not {article} {base.__name__}")
    return loaded
