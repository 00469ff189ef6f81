"""Declaring where control types are defined (entry point group ``reflex_actions.controls``) the
way pip would: a ``.dist-info`` with an ``entry_points.txt`` on ``sys.path``.

:data:`BUILT_IN` are the declarations ``pyproject.toml`` makes for the built-in control types
(a test's declarations of the same places count once).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

from reflex_actions.registry import CONTROL_ENTRY_POINT_GROUP

#: Where each built-in control type is defined, as ``pyproject.toml`` declares it
#: (``[project.entry-points."reflex_actions.controls"]``, read from the installed package).
BUILT_IN = tuple(
    f"{point.name} = {point.value}"
    for point in entry_points(group=CONTROL_ENTRY_POINT_GROUP)
    if point.dist is not None and point.dist.name == "datahub-reflex"
)


def write_declarations(site: Path, *lines: str) -> Path:
    """A distribution in ``site`` declaring ``lines`` (``type = module:Class``); ``site``."""
    info = site / "reflex_test_controls-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reflex-test-controls\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{CONTROL_ENTRY_POINT_GROUP}]\n" + "".join(f"{line}\n" for line in lines)
    )
    return site
