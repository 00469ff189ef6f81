"""Finding and loading plugin classes from entry points (kinds, control types, engines,
catalog stores): one scan of the installed packages for every group, and one place for the
refusal of a plugin that cannot load or is not what its group expects."""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import TypeVar

from reflex_actions.errors import ReflexError, first_line

_Plugin = TypeVar("_Plugin")


def entry_points_in(group: str) -> EntryPoints:
    """The entry points of ``group``. The installed packages are scanned once per ``sys.path``
    for every group: a scan reads every distribution's metadata (~9 ms for 150 packages), and
    a ``control run`` asks for two groups."""
    return _installed(tuple(sys.path)).select(group=group)


@lru_cache(maxsize=1)
def _installed(path: tuple[str, ...]) -> EntryPoints:
    return entry_points()


def rescan_plugins() -> None:
    """Forget the scan: the next lookup reads the installed packages again (a package
    installed into a folder already on ``sys.path``)."""
    _installed.cache_clear()


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
