"""The handlers' layout holds: a decision module imports no other decision module (the shared
steps live in modules of their own), except the router of the lesson gates (issue 28)."""

from __future__ import annotations

import ast
from pathlib import Path

import reflex_actions.handlers as handlers_package

HANDLERS = Path(handlers_package.__path__[0])
#: the modules that decide on an event (a route's handler, or one the gates' router calls)
DECISIONS = {
    "gates",
    "root_cause",
    "publish",
    "versions",
    "ownership",
    "incident_resolved",
    "landing_runs",
    "recorded_runs",
    "scheduled",
}
#: the router of a lesson's properties events: it calls the decisions it routes to
ROUTERS = {"gates"}


def _handler_imports(module: Path) -> set[str]:
    """The handler modules ``module`` imports, at its top or inside a function."""
    imported = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            name = node.module
            if name.startswith("reflex_actions.handlers."):
                imported.add(name.split(".")[2])
            elif name == "reflex_actions.handlers":
                imported.update(alias.name for alias in node.names)
    return imported


def test_every_decision_module_exists() -> None:
    assert {path.stem for path in HANDLERS.glob("*.py")} >= DECISIONS


def test_no_decision_module_imports_another_for_its_helpers() -> None:
    reaching = {
        path.stem: sorted(_handler_imports(path) & DECISIONS - {path.stem})
        for path in HANDLERS.glob("*.py")
        if path.stem not in ROUTERS
    }
    assert {module: found for module, found in reaching.items() if found} == {}


def test_the_guard_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from reflex_actions.handlers.publish import on_approved\n")
    assert _handler_imports(module) == {"publish"}
