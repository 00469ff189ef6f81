"""Mutation testing of the decision-critical modules (issue 28, item 9): a script, never run in CI.

For each module, every mutant is applied alone to a scratch copy of the repository and the tests
that reach the module run against it (``-x -q``, with a timeout); a mutant is *killed* when a
test fails (or the mutated code no longer imports), *survives* when they all pass, *times out*
when they do not finish (counted as killed, as mutmut counts them); an *error* is a mutant
that stops pytest from starting (the package no longer imports while the conftest loads:
pytest exits 3 or 4), killed too. The kill rate is (killed + timeout + error) / (mutants -
equivalent-judged); a mutant no test runs ("not covered") survives.

Mutants (ast-based, in every function and method body, nested ones too): a comparison flipped
(``==``/``!=``, ``is``/``is not``, ``in``/``not in``) or its boundary moved (``<``/``<=``,
``>``/``>=``), ``and``/``or`` swapped, a ``not`` removed, an integer constant ±1, ``True``/
``False`` swapped, ``+``/``-`` swapped (``+=``/``-=`` too), a statement dropped (``pass``), a
``return x`` made ``return None``. Module-level tables (a dict, set, tuple or list assigned at
module level, e.g. ``TRANSITIONS`` or ``LESSON_DECISIONS``) are mutated by hand: each entry
dropped in turn, nested ones too (each target state of each ``TRANSITIONS`` entry).

Why not mutmut 3.8.1: it mutates function bodies only (the tables would still need this loop),
copies the whole project into ``mutants/`` and runs its stats pass over the configured tests; the
loop below is small, confined to one module and the tests that reach it, and runs each mutant
only against the tests that execute its line (measured once per module on the unmutated code
with a line tracer; a table's mutants run every test of the module, since a table is read at
import, and so do the mutants of a line only the imports run, e.g. a function building a
table). The parent process imports the test modules once, then forgets the module and every
module that imports it (directly or not); each mutant runs in a forked child that imports
those afresh from the scratch copy (no bytecode written or read for the scratch copy), so the
other imports are paid once.

Run it at low priority, one mutant at a time (the machine is shared)::

    nice -n 19 .venv/bin/python bench/mutation.py [--module lifecycle ...] [--out FILE.json]
        [--tree DIR] [--survivors-of EARLIER.json]

``--tree`` measures another checkout (e.g. the commit before the tests were added).
``--survivors-of`` runs only the mutants that an earlier run (its ``--out``) did not kill, and
counts the others killed: valid when the modules are unchanged since and tests were only
added (a test that killed a mutant still does).

It prints, per module: mutants, killed, timeout, survived, equivalent-judged (the comment block
at the end of this file, parsed), and the kill rate of the non-equivalent mutants; then each
survivor not judged equivalent.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: module -> (its file, the test files that reach it: ``grep -rl`` for the module's name and
#: the names it defines under tests/, the ones that exercise its decisions; not the slowest
#: whole-loop files (cli/test_steward_lifecycle.py, handlers/test_scope_rule.py: 26 s and 30 s
#: a run on the shared machine), so that a module is measured within minutes)
MODULES: dict[str, tuple[str, list[str]]] = {
    "lifecycle": (
        "reflex_actions/lessons/lifecycle.py",
        [
            "tests/lessons/test_lifecycle.py",
            "tests/lessons/test_lifecycle_walks.py",
        ],
    ),
    "metrics": (
        "reflex_actions/backtest/metrics.py",
        [
            "tests/backtest/test_held_out.py",
            "tests/backtest/test_per_snapshot_cost.py",
            "tests/backtest/test_backtest.py",
            "tests/backtest/test_table_histories.py",
            "tests/hardening/test_markdown.py",
        ],
    ),
    "gates": (
        "reflex_actions/handlers/gates.py",
        [
            "tests/handlers/test_trust.py",
            "tests/handlers/test_root_cause.py",
            "tests/handlers/test_lesson_record.py",
            "tests/handlers/test_ownership.py",
            "tests/handlers/test_decisions.py",
            "tests/lessons/test_gate.py",
        ],
    ),
    "landing": (
        "reflex_actions/handlers/landing.py",
        [
            "tests/hardening/test_landing_paths.py",
            "tests/handlers/test_run_controls.py",
            "tests/handlers/test_landing_on_tables.py",
        ],
    ),
    "uniqueness": (
        "reflex_actions/controls/uniqueness.py",
        [
            "tests/controls/test_uniqueness.py",
            "tests/conformance/test_duplicate_rows_kind.py",
            "tests/backtest/test_backtest.py",
            "tests/hardening/test_one_line_spec.py",
        ],
    ),
    "bounded": (
        "reflex_actions/bounded.py",
        [
            "tests/hardening/test_bounded_text.py",
            "tests/cli/test_config_secrets.py",
            "tests/hardening/test_spec_bounds.py",
        ],
    ),
}


# --------------------------------------------------------------------------------- mutants


@dataclass
class Mutant:
    line: int
    description: str
    apply: Callable[[], None]
    table: bool = False

    @property
    def key(self) -> str:
        return f"{self.line}: {self.description}"


COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
SYMBOL = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Add: "+",
    ast.Sub: "-",
    ast.And: "and",
    ast.Or: "or",
}
SKIPPED_FIELDS = {"annotation", "returns", "decorator_list", "type_comment"}


def _children(node: ast.AST) -> Iterator[tuple[ast.AST, str, int | None]]:
    for field, value in ast.iter_fields(node):
        if field in SKIPPED_FIELDS:
            continue
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield item, field, i
        elif isinstance(value, ast.AST):
            yield value, field, None


def _walk(node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST, str, int | None]]:
    """(node, parent, field, index) below ``node``, depth first, in source order."""
    for child, field, index in _children(node):
        yield child, node, field, index
        yield from _walk(child)


def _replace(parent: ast.AST, field: str, index: int | None, new: ast.AST) -> None:
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new


def _short(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 70 else text[:67] + "..."


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _function_mutants(function: ast.AST, out: list[Mutant]) -> None:
    for node, parent, field, index in _walk(function):
        if (
            isinstance(node, ast.stmt)
            and index is not None
            and field in ("body", "orelse", "finalbody")
        ):
            if _is_docstring(node) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                pass
            elif isinstance(node, ast.Return):
                if node.value is not None and not (
                    isinstance(node.value, ast.Constant) and node.value.value is None
                ):
                    out.append(
                        Mutant(
                            node.lineno,
                            f"`{_short(node)}` -> `return None`",
                            lambda n=node: setattr(n, "value", None),
                        )
                    )
            else:
                out.append(
                    Mutant(
                        node.lineno,
                        f"drop `{_short(node)}`",
                        lambda p=parent, f=field, i=index: _replace(p, f, i, ast.Pass()),
                    )
                )
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                swap = COMPARE_SWAPS[type(op)]
                out.append(
                    Mutant(
                        node.lineno,
                        f"`{_short(node)}`: `{SYMBOL[type(op)]}` -> `{SYMBOL[swap]}`",
                        lambda n=node, i=i, s=swap: n.ops.__setitem__(i, s()),
                    )
                )
        elif isinstance(node, ast.BoolOp):
            swap = ast.Or if isinstance(node.op, ast.And) else ast.And
            out.append(
                Mutant(
                    node.lineno,
                    f"`{_short(node)}`: `{SYMBOL[type(node.op)]}` -> `{SYMBOL[swap]}`",
                    lambda n=node, s=swap: setattr(n, "op", s()),
                )
            )
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            out.append(
                Mutant(
                    node.lineno,
                    f"`{_short(node)}`: drop `not`",
                    lambda n=node, p=parent, f=field, i=index: _replace(p, f, i, n.operand),
                )
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            out.append(
                Mutant(
                    node.lineno,
                    f"`{node.value}` -> `{not node.value}`",
                    lambda n=node: setattr(n, "value", not n.value),
                )
            )
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for delta in (1, -1):
                out.append(
                    Mutant(
                        node.lineno,
                        f"`{node.value}` -> `{node.value + delta}`",
                        lambda n=node, d=delta: setattr(n, "value", n.value + d),
                    )
                )
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(
            node.op, (ast.Add, ast.Sub)
        ):
            swap = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
            out.append(
                Mutant(
                    node.lineno,
                    f"`{_short(node)}`: `{SYMBOL[type(node.op)]}` -> `{SYMBOL[swap]}`",
                    lambda n=node, s=swap: setattr(n, "op", s()),
                )
            )


def _table_mutants(statement: ast.Assign | ast.AnnAssign, out: list[Mutant]) -> None:
    name = _short(statement.targets[0] if isinstance(statement, ast.Assign) else statement.target)
    assert statement.value is not None
    for node in [statement.value, *(n for n, *_ in _walk(statement.value))]:
        if isinstance(node, ast.Dict):
            for i, key in enumerate(node.keys):
                what = _short(key) if key is not None else f"**{_short(node.values[i])}"

                def drop(n: ast.Dict = node, i: int = i) -> None:
                    del n.keys[i], n.values[i]

                out.append(Mutant(node.lineno, f"{name}: drop entry `{what}`", drop, table=True))
        elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            for i, item in enumerate(node.elts):
                out.append(
                    Mutant(
                        item.lineno,
                        f"{name}: drop `{_short(item)}` of `{_short(node)}`",
                        lambda n=node, i=i: n.elts.__delitem__(i),
                        table=True,
                    )
                )


def mutants_of(source: str) -> list[tuple[Mutant, str]]:
    """Every mutant of the module, with the mutated module's source (duplicates dropped)."""

    def collect(tree: ast.Module) -> list[Mutant]:
        out: list[Mutant] = []
        for top in tree.body:
            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _function_mutants(top, out)
            elif isinstance(top, ast.ClassDef):
                for item in top.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        _function_mutants(item, out)
            elif (
                isinstance(top, (ast.Assign, ast.AnnAssign))
                and top.value is not None
                and not any(isinstance(t, ast.Tuple) for t in getattr(top, "targets", []))
            ):
                _table_mutants(top, out)
        return out

    original = ast.unparse(ast.parse(source))
    count = len(collect(ast.parse(source)))
    seen = {original}
    result = []
    for i in range(count):
        tree = ast.parse(source)
        mutant = collect(tree)[i]
        mutant.apply()
        mutated = ast.unparse(ast.fix_missing_locations(tree))
        if mutated not in seen:
            seen.add(mutated)
            result.append((mutant, mutated))
    return result


# ---------------------------------------------------------------------------------- runner


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def dependents(root: Path, module: str) -> set[str]:
    """``module`` and every module of the project that imports it, directly or not (any
    import, a function's own too): the ones a mutant of it must be imported afresh for."""
    imports: dict[str, set[str]] = {}
    for top in ("reflex_actions", "tests"):
        for path in (root / top).rglob("*.py"):
            names: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
                    names.update(f"{node.module}.{alias.name}" for alias in node.names)
            imports[_module_name(path, root)] = names
    found = {module}
    while True:
        more = {name for name, names in imports.items() if names & found} - found
        if not more:
            return found
        found |= more


def _forget(names: set[str]) -> None:
    """Forget these modules (each child imports them afresh), and their parent packages'
    attributes naming them (``from package import module`` would find the old one)."""
    for name in names:
        sys.modules.pop(name, None)
        parent, _, child = name.rpartition(".")
        if parent and parent in sys.modules and parent not in names:
            with contextlib.suppress(AttributeError):
                delattr(sys.modules[parent], child)


def _child(run: Callable[[], int], timeout: float) -> str:
    """Run ``run`` in a forked child: "passed", "failed", "error" (pytest's own) or "timeout"."""
    pid = os.fork()
    if pid == 0:  # the child
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            code = run()
        except BaseException:
            code = 1
        os._exit(int(code))
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return {0: "passed", 1: "failed", 2: "failed"}.get(code, f"error {code}")
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)


PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "-o", "addopts=--strict-markers"]


def _pytest(args: list[str], plugins: list[object] | None = None) -> int:
    import pytest

    return int(pytest.main([*PYTEST_ARGS, *args], plugins=plugins or []))


class _LineRecorder:
    """A pytest plugin recording, per test, the lines of one file it executes, and its outcome
    and duration."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.current: set[int] | None = None
        self.lines: dict[str, set[int]] = {}
        self.outcome: dict[str, bool] = {}
        self.duration: dict[str, float] = {}

    def _local(self, frame, event, arg):
        if event == "line" and self.current is not None:
            self.current.add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename == self.filename:
            if self.current is not None:
                self.current.add(frame.f_lineno)
            return self._local
        return None

    def pytest_runtest_protocol(self, item, nextitem):
        import threading

        self.current = self.lines.setdefault(item.nodeid, set())
        sys.settrace(self._global)
        threading.settrace(self._global)

    def pytest_runtest_logfinish(self, nodeid, location):
        import threading

        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
        self.current = None

    def pytest_runtest_logreport(self, report):
        ok = self.outcome.get(report.nodeid, True) and not report.failed
        self.outcome[report.nodeid] = ok
        self.duration[report.nodeid] = self.duration.get(report.nodeid, 0.0) + report.duration


def _coverage(scratch: Path, module_file: str, tests: list[str], into: Path) -> None:
    """Per test, the module's lines it runs (on the unmutated code), written to ``into``."""
    recorder = _LineRecorder(str(scratch / module_file))

    def run() -> int:
        imported: set[int] = set()  # the lines run while the tests are collected (imports)
        recorder.current = imported
        sys.settrace(recorder._global)
        _pytest(["-p", "no:randomly", *tests], plugins=[recorder])
        sys.settrace(None)
        tests_run = {
            nodeid: {
                "lines": sorted(lines),
                "ok": recorder.outcome.get(nodeid, False),
                "seconds": recorder.duration.get(nodeid, 0.0),
            }
            for nodeid, lines in recorder.lines.items()
        }
        into.write_text(json.dumps({"tests": tests_run, "imported": sorted(imported)}))
        return 0

    result = _child(run, timeout=1800)
    if result != "passed":
        raise SystemExit(f"the baseline run of {tests} did not finish: {result}")


def equivalent_judged() -> dict[tuple[str, str], str]:
    """(module, mutant key) -> why it is equivalent: the comment block at the end of this file."""
    judged: dict[tuple[str, str], str] = {}
    block = Path(__file__).read_text().split("# EQUIVALENT MUTANTS", 1)[1]
    entry: tuple[str, str] | None = None
    for line in block.splitlines():
        if match := re.match(r"# (\w+) (\d+: .+)$", line):
            entry = (match[1], match[2])
        elif entry and (match := re.match(r"#\s+why: (.+)$", line)):
            judged[entry] = match[1]
        elif entry in judged and (match := re.match(r"#\s{5,}(.+)$", line)):
            judged[entry] += " " + match[1]  # type: ignore[index]
    return judged


def _earlier_survivors(result: dict[str, object]) -> set[str]:
    return {
        str(survivor).removesuffix(" (no test runs it)")
        for survivor in result["survivors"]  # type: ignore[union-attr]
    } | set(result.get("equivalent_keys", []))  # type: ignore[arg-type]


def measure(
    name: str, scratch: Path, verbose: bool, earlier: dict[str, object] | None = None
) -> dict[str, object]:
    module_file, tests = MODULES[name]
    target = scratch / module_file
    source = target.read_text()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        coverage_file = Path(handle.name)
    started = time.monotonic()
    _coverage(scratch, module_file, tests, coverage_file)
    measured = json.loads(coverage_file.read_text())
    baseline, imported = measured["tests"], set(measured["imported"])
    coverage_file.unlink()
    broken = [nodeid for nodeid, seen in baseline.items() if not seen["ok"]]
    if broken:
        raise SystemExit(f"{name}: tests fail on the unmutated code: {broken}")
    by_line: dict[int, list[str]] = {}
    for nodeid, seen in baseline.items():
        for line in seen["lines"]:
            by_line.setdefault(line, []).append(nodeid)
    judged = equivalent_judged()
    counts = {
        "mutants": 0,
        "killed": 0,
        "timeout": 0,
        "survived": 0,
        "not_covered": 0,
        "equivalent": 0,
        "error": 0,
    }
    survivors, stale, equivalent_keys = [], [], []
    mutants = mutants_of(source)
    all_tests = list(baseline)
    try:
        rerun = _earlier_survivors(earlier) if earlier is not None else None
        for mutant, mutated in mutants:
            counts["mutants"] += 1
            if rerun is not None and mutant.key not in rerun:
                counts["killed"] += 1  # killed by the earlier run's tests, which still run
                continue
            chosen = by_line.get(mutant.line, [])
            if mutant.table or (not chosen and mutant.line in imported):
                chosen = all_tests  # read at import: every test reads it
            chosen = sorted(chosen, key=lambda nodeid: baseline[nodeid]["seconds"])  # fast first
            key = (name, mutant.key)
            if not chosen:
                outcome = "not covered"
            else:
                target.write_text(mutated)
                seconds = sum(baseline[nodeid]["seconds"] for nodeid in chosen)
                outcome = _child(lambda c=chosen: _pytest(["-x", *c]), timeout=3 * seconds + 20)
            if outcome == "failed":
                counts["killed"] += 1
                if key in judged:
                    stale.append(mutant.key)
            elif outcome == "timeout":
                counts["timeout"] += 1
            elif outcome.startswith("error"):  # pytest could not start: the package breaks
                counts["error"] += 1
            elif key in judged:
                counts["equivalent"] += 1
                equivalent_keys.append(mutant.key)
            else:
                counts["survived" if outcome == "passed" else "not_covered"] += 1
                survivors.append(
                    f"{mutant.key}{' (no test runs it)' if outcome != 'passed' else ''}"
                )
            if verbose:
                print(f"  {name} {mutant.key} -> {outcome}", flush=True)
    finally:
        target.write_text(source)
    live = counts["mutants"] - counts["equivalent"]
    killed = counts["killed"] + counts["timeout"] + counts["error"]
    return {
        "module": name,
        "file": module_file,
        "tests": tests,
        **counts,
        "kill_rate": round(killed / live, 4) if live else None,
        "survivors": survivors,
        "judged_equivalent_but_killed": stale,
        "equivalent_keys": equivalent_keys,
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", action="append", choices=list(MODULES))
    parser.add_argument("--out", type=Path, help="write the figures as JSON here too")
    parser.add_argument(
        "--survivors-of", type=Path, help="run only what this earlier --out did not kill"
    )
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--verbose", action="store_true", help="print every mutant's outcome")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the tree to measure (its modules and tests; default: this one)",
    )
    args = parser.parse_args()
    tree = args.tree.resolve()
    earlier = {}
    if args.survivors_of:
        earlier = {result["module"]: result for result in json.loads(args.survivors_of.read_text())}
    names = args.module or list(MODULES)
    if args.list:
        for name in names:
            for mutant, _ in mutants_of((tree / MODULES[name][0]).read_text()):
                print(f"{name} {mutant.key}")
        return
    sys.dont_write_bytecode = True
    scratch = Path(tempfile.mkdtemp(prefix="reflex-mutation-"))
    shutil.copytree(
        tree,
        scratch,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "__pycache__",
            "mutants",
            "data",
            ".pytest_cache",
            ".ruff_cache",
            ".hypothesis",
            "*.egg-info",
        ),
    )
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    # the imports paid once: every test module; each module's children import afresh only
    # the modules that depend on it (the parent forgets them, and imports them back after)
    for name in names:
        for test in MODULES[name][1]:
            __import__(test[:-3].replace("/", "."))
    kept = dict(sys.modules)
    results = []
    try:
        for name in names:
            forgotten = dependents(scratch, _module_name(scratch / MODULES[name][0], scratch))
            _forget(forgotten)
            result = measure(name, scratch, args.verbose, earlier.get(name))
            sys.modules.update(kept)
            for module in forgotten & set(kept):
                parent, _, child = module.rpartition(".")
                if parent in sys.modules:
                    setattr(sys.modules[parent], child, kept[module])
            results.append(result)
            rate = result["kill_rate"]
            print(
                f"{name:<11} mutants {result['mutants']:>4}  killed {result['killed']:>4}  "
                f"timeout {result['timeout']:>3}  survived {result['survived']:>3}  "
                f"not covered {result['not_covered']:>3}  equivalent {result['equivalent']:>3}  "
                f"error {result['error']:>2}  kill rate {rate:.1%} of non-equivalent  "
                f"({result['seconds']} s)",
                flush=True,
            )
            for survivor in result["survivors"]:
                print(f"    survived: {survivor}", flush=True)
            for stale in result["judged_equivalent_but_killed"]:
                print(f"    judged equivalent, but killed: {stale}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()


# EQUIVALENT MUTANTS: the survivors judged equivalent (no behaviour tells them from the code),
# as "# <module> <line>: <mutant as --list prints it>" then "#   why: <reason>".
#
# lifecycle 197: drop `assert approved is not None`
#   why: both callers (rolled_out, rollout_phase_done) call _update_approved only once they checked
#        `approved is not None`; the assert can never fail, so dropping it changes nothing.
# lifecycle 244: `approved is None or lesson.revision is None`: `or` -> `and`
#   why: with `and`, _drop_draft also runs when a version is in force and no draft waits; it then
#        copies the version's control, report, field mappings and backtest onto the lesson, which
#        already hold them (publish builds the version from the lesson's own, handlers/publish.py,
#        and a stored lesson gets them back on load, Lesson.kept_on_lesson), clears approval_open
#        and sets the gate to APPROVED, both already so for a lesson in force with no draft; a draft
#        without a version in force cannot be (draft_revision refuses it).
# lifecycle 248: `False` -> `True`
#   why: _drop_draft's callers (refuse_revision, retire) then move the lesson to PUBLISHED or
#        RETIRED, and move() clears approval_open for every state but PENDING_APPROVAL.
# gates 47: DecisionHandler: drop `Lesson` of `[Lesson, AspectChange, HandlerContext]`
#   why: a type alias (DecisionHandler), read by type checkers only; no code inspects its arguments
#        at run time.
# gates 47: DecisionHandler: drop `AspectChange` of `[Lesson, AspectChange, HandlerContext]`
#   why: a type alias, as above.
# gates 47: DecisionHandler: drop `HandlerContext` of `[Lesson, AspectChange, HandlerContext]`
#   why: a type alias, as above.
# gates 49: DecisionTest: drop `Lesson` of `[Lesson, AspectChange, HandlerContext]`
#   why: a type alias (DecisionTest), as above.
# gates 49: DecisionTest: drop `AspectChange` of `[Lesson, AspectChange, HandlerContext]`
#   why: a type alias, as above.
# gates 49: DecisionTest: drop `HandlerContext` of `[Lesson, AspectChange, HandlerContext]`
#   why: a type alias, as above.
# gates 50: PropertyValues: drop `str` of `(str, list[str | float])`
#   why: a type alias (PropertyValues); dict[...] accepts any arguments at run time and nothing
#        reads them.
# gates 50: PropertyValues: drop `list[str | float]` of `(str, list[str | float])`
#   why: a type alias, as above.
# uniqueness 33: `True` -> `False`
#   why: model_dump(exclude_none=False) adds only the unset one of field/fields as None; pydantic
#        validates an explicit None as the absent default, so the renamed control is equal.
# uniqueness 51: `0` -> `-1`
#   why: the single-key branch (len(keys) == 1): keys[-1] is keys[0].
# uniqueness 52: `0` -> `-1`
#   why: the single-key branch, as above.
# uniqueness 118: `True` -> `False`
#   why: zip(strict=...) in sample_row: each sample row is the key's columns then occurrences, by
#        the query's own SELECT, so the lengths always match and strict never raises.
# bounded 68: `False` -> `True`
#   why: include_url / include_input (two mutants, one line) only add keys to pydantic's error
#        dicts; validated() reads `loc` and `msg` alone.
# bounded 164: `200` -> `201`
#   why: a ReaderError's message (the only unmarked YAMLError a str raises) is under 200
#        characters, so the cut never applies. (The raise on this line was unreachable until
#        5e37d8c: the loader was built outside the try; it is now killed by
#        test_a_character_yaml_refuses_is_a_bounded_error.)
# bounded 164: `200` -> `199`
#   why: as above.
# bounded 166: drop `if loader is not None:     loader.dispose()`
#   why: dispose() only drops the parser's state for the garbage collector; the loader is not used
#        again and nothing observable changes.
# bounded 167: drop `loader.dispose()`
#   why: as above.
