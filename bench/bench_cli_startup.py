"""Benchmark the start-up of the ``datahub-reflex`` CLI against ``python -c "import duckdb"``.

Usage::

    python bench/bench_cli_startup.py [--repeat 15] [--max-wait 300] [--tree DIR ...]

Times fresh processes of the CLI, each running what the console script
``.venv/bin/datahub-reflex`` runs (``sys.exit(cli())``) from the working tree ``--tree``
(default: this repository; e.g. a ``git archive`` of an older commit, for a before/after).
Given several times, every tree's commands run in the same rounds, so a before and an after
share whatever load the machine has; their figures are named ``command (tree folder name)``.
The commands are ``--help``,
``control compile action_configs/controls/unique_transaction_id.yaml`` and ``control run`` of
that spec on ``snapshots/finance.payments/2026-09-09.parquet`` (739 rows,
100 duplicates: exit 1), beside ``python -c pass`` (the interpreter alone) and
``python -c "import duckdb"`` (the floor of anything that runs a control). ``control run``
runs twice: reading the SQL it rendered in an earlier run (kept in the bench's own
``REFLEX_CACHE_DIR``, written by the warm-up), and with that store off (``nothing stored``: a
first run of a control, or one on a snapshot of a new shape), which compiles and renders.
Targets (issue 15): ``--help`` and ``control compile`` under 0.5 s, ``control run`` under 0.3 s
more than importing DuckDB.

Two bytecode settings, reported apart:

- ``cached``: compiled bytecode exists, as for an installed package (``PYTHONPYCACHEPREFIX``
  points at a temp folder, warmed by one untimed run of each command);
- ``source``: ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` in the working tree, as in
  this development environment: every Reflex module imported is compiled from source on every
  start (third-party packages keep their installed bytecode).

Runs are interleaved round-robin with the order rotating every round; the median and best wall
time and the median CPU time (user + system of the child, DuckDB's threads included) are
reported. The measurement holds ``/tmp/reflex-bench.lock`` and waits for a quiet machine as
``bench_referential_integrity.py`` does; the loads are recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from bench_referential_integrity import bench_lock, wait_for_quiet
from bench_row_kinds import print_load
from bench_uniqueness import load_average
from machine import machine_info

REPO = Path(__file__).resolve().parents[1]
SPEC = "action_configs/controls/unique_transaction_id.yaml"
SNAPSHOT = "snapshots/finance.payments/2026-09-09.parquet"
PYTHON = sys.executable
#: What the console script runs; with ``-c`` the tree it runs in comes first on ``sys.path``.
CLI = [
    PYTHON,
    "-c",
    "import sys; from reflex_actions.cli.main import cli; sys.argv[0] = 'datahub-reflex'; "
    "sys.exit(cli())",
]

#: name -> (command, the exit code it must end with): the interpreter's, run once a round
BASELINES: dict[str, tuple[list[str], int]] = {
    "python -c pass": ([PYTHON, "-c", "pass"], 0),
    'python -c "import duckdb"': ([PYTHON, "-c", "import duckdb"], 0),
}
#: name -> (command, the exit code it must end with, environment it adds): the CLI's, run in
#: every tree. ``control run`` finds the SQL it rendered in the bench's own cache folder (written
#: by the warm-up run); ``control run, nothing stored`` runs with the store off, as a first run
#: of a control (or one on a new shape of snapshot) does.
CLI_COMMANDS: dict[str, tuple[list[str], int, dict[str, str]]] = {
    "datahub-reflex --help": ([*CLI, "--help"], 0, {}),
    "control compile": ([*CLI, "control", "compile", SPEC], 0, {}),
    "control run": ([*CLI, "control", "run", SPEC, "--snapshot", SNAPSHOT], 1, {}),
    "control run, nothing stored": (
        [*CLI, "control", "run", SPEC, "--snapshot", SNAPSHOT],
        1,
        {"REFLEX_CACHE_DIR": ""},
    ),
}
#: Issue 15's targets: the command's median wall (minus the baseline's, if named) must be under.
TARGETS = {
    "datahub-reflex --help": (0.5, None),
    "control compile": (0.5, None),
    "control run": (0.3, 'python -c "import duckdb"'),
    "control run, nothing stored": (0.3, 'python -c "import duckdb"'),
}
SETTINGS = ("cached", "source")


def environment(setting: str, pycache: Path, cache: Path) -> dict[str, str]:
    """The child's environment for one bytecode setting (see the module docstring), with
    ``cache`` as the folder ``control run`` keeps its rendered SQL in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")
    }
    env["REFLEX_CACHE_DIR"] = str(cache)
    if setting == "cached":
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Run(NamedTuple):
    """One timed command: its figures' name, the command's (what its target is set for), what
    it runs, where, and the exit code it must end with."""

    name: str
    command_name: str
    command: list[str]
    tree: Path
    expected: int
    added_env: dict[str, str]


def plan(trees: list[Path]) -> list[Run]:
    """The baselines (in the first tree), then every tree's CLI commands."""
    runs = [
        Run(name, name, command, trees[0], code, {}) for name, (command, code) in BASELINES.items()
    ]
    for tree in trees:
        suffix = f" ({tree.name})" if len(trees) > 1 else ""
        for name, (command, code, added) in CLI_COMMANDS.items():
            runs.append(Run(name + suffix, name, command, tree, code, added))
    return runs


def timed(run: Run, env: dict[str, str]) -> dict[str, float]:
    """Wall and CPU seconds of one fresh process of ``run``; its exit code checked."""
    name, _, command, tree, expected, added = run
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env={**env, **added}, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expected:
        raise RuntimeError(
            f"{name} exited {done.returncode}, expected {expected}:\n{done.stderr.decode()[-2000:]}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": wall, "cpu_seconds": cpu}


def stats(runs: list[dict[str, float]]) -> dict[str, Any]:
    walls = [run["seconds"] for run in runs]
    return {
        "seconds": round(statistics.median(walls), 3),
        "best_seconds": round(min(walls), 3),
        "cpu_seconds": round(statistics.median(run["cpu_seconds"] for run in runs), 3),
        "runs": [round(wall, 3) for wall in walls],
    }


def verdicts(figures: dict[str, dict[str, Any]], runs: list[Run]) -> dict[str, dict[str, Any]]:
    """Each target's measured figure (median wall, less its baseline's) and whether it is met,
    for every tree's command."""
    result = {}
    for run in runs:
        if run.command_name not in TARGETS:
            continue
        limit, baseline = TARGETS[run.command_name]
        measured = figures[run.name]["seconds"] - (figures[baseline]["seconds"] if baseline else 0)
        result[run.name] = {
            "measured_seconds": round(measured, 3),
            "target_seconds": limit,
            "over": baseline,
            "met": measured < limit,
        }
    return result


def benchmark(trees: list[Path], repeat: int, max_wait: float) -> dict[str, Any]:
    """Time every command of every tree in both settings ``repeat`` times, interleaved."""
    planned = plan(trees)
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        s: {run.name: [] for run in planned} for s in SETTINGS
    }
    with (
        tempfile.TemporaryDirectory(prefix="reflex-pycache-") as pycache,
        tempfile.TemporaryDirectory(prefix="reflex-cache-") as cache,
        bench_lock(),
    ):
        envs = {setting: environment(setting, Path(pycache), Path(cache)) for setting in SETTINGS}
        for setting in SETTINGS:  # warm the page cache and (cached) write the bytecode
            for run in planned:
                timed(run, envs[setting])
        start = wait_for_quiet(max_wait)
        rounds = []
        for round_index in range(repeat):
            rounds.append(start if round_index == 0 else wait_for_quiet(max_wait / 5))
            shift = round_index % len(planned)
            for run in planned[shift:] + planned[:shift]:
                for setting in SETTINGS:
                    runs[setting][run.name].append(timed(run, envs[setting]))
            print(f"  round {round_index + 1}/{repeat} done (load {load_average()})")
        load_after = load_average()
    figures = {s: {run.name: stats(runs[s][run.name]) for run in planned} for s in SETTINGS}
    return {
        "benchmark": "cli_startup",
        "trees": [str(tree) for tree in trees],
        "repeat": repeat,
        "settings": {
            s: {"figures": figures[s], "targets": verdicts(figures[s], planned)} for s in SETTINGS
        },
        "load_average": {
            "before": start["load"],
            "after": load_after,
            "waited_seconds": start["waited_seconds"],
            "rounds": [round_start["load"] for round_start in rounds],
        },
        "machine": machine_info("duckdb", "click", "pydantic"),
    }


def print_result(result: dict[str, Any]) -> None:
    for setting, figures in result["settings"].items():
        print(f"\nbytecode {setting}")
        print(f"{'command':<44}{'median s':>10}{'best s':>10}{'cpu s':>10}")
        for name, row in figures["figures"].items():
            print(
                f"{name:<44}{row['seconds']:>10.3f}{row['best_seconds']:>10.3f}"
                f"{row['cpu_seconds']:>10.3f}"
            )
        for name, verdict in figures["targets"].items():
            over = f" over {verdict['over']}" if verdict["over"] else ""
            state = "met" if verdict["met"] else "MISSED"
            print(
                f"target {name}{over} < {verdict['target_seconds']} s: "
                f"{verdict['measured_seconds']:.3f} s, {state}"
            )
    print_load(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--max-wait", type=float, default=300.0)
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="working tree to run the CLI of (repeat it to compare trees in the same rounds)",
    )
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [REPO]]
    result = benchmark(trees, args.repeat, args.max_wait)
    print_result(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
