"""The packages' import graph, read from the code with ``ast`` (imports inside functions
count): no new circle may form. The circles that remain are listed here, to be cut (issue 28
item 5); a move that cuts one must remove it from the list, and one that adds a package to a
circle, or a new circle, fails."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import reflex_actions

PACKAGE = Path(reflex_actions.__path__[0])

#: the circles left today: each a set of top-level packages (or modules) reaching each other
KNOWN_CIRCLES = {
    frozenset(
        {
            "backtest",
            "catalog",
            "config",
            "controls",
            "engines",
            "executor",
            "kinds",
            "lessons",
            "registry",
            "similarity",
        }
    ),
    frozenset({"cli", "demo"}),
}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Top-level package (or module) -> those it imports, anywhere in its files."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in root.rglob("*.py"):
        source = path.relative_to(root).parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == root.name and len(parts) > 1 and parts[1] != source:
                    edges[source].add(parts[1])
    return edges


def circles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_new_circle_forms_among_the_packages() -> None:
    assert circles(import_graph()) == KNOWN_CIRCLES


def test_the_graph_sees_a_circle_through_an_import_inside_a_function(tmp_path: Path) -> None:
    root = tmp_path / "reflex_actions"
    (root / "a").mkdir(parents=True)
    (root / "b.py").write_text("from reflex_actions.a.x import y\n")
    (root / "a" / "x.py").write_text("def f():\n    from reflex_actions.b import z\n")
    (root / "c.py").write_text("import reflex_actions.b\n")
    assert circles(import_graph(root)) == {frozenset({"a", "b"})}
