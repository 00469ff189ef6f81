"""CLI start-up: what each command path imports, checked in fresh processes (no timing).

``--help`` must list the commands without importing them (one of them loads the DataHub SDK),
and no CLI path may load the DataHub SDK, litellm or pandas unless its work needs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from reflex_actions.cli.main import COMMANDS, cli
from tests.controls.declared import BUILT_IN, write_declarations

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "action_configs" / "controls" / "unique_transaction_id.yaml"
SNAPSHOT = REPO / "snapshots" / "finance.payments" / "2026-09-09.parquet"

#: Executes the statement given as its second argument in a fresh interpreter, then writes the
#: names of the modules imported (and the exit code) to the file named by its first argument.
PROBE = """
import json, sys
report, code = sys.argv[1], 0
try:
    exec(sys.argv[2])
except SystemExit as stop:
    code = stop.code
with open(report, "w") as handle:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, handle)
"""
#: The console script, given the probe's remaining arguments.
RUN_CLI = (
    "from reflex_actions.cli.main import cli; cli.main(sys.argv[3:], prog_name='datahub-reflex')"
)

#: Packages no start-up path below needs: the DataHub SDK, the LLM client, dataframes.
NEVER_NEEDED = ("datahub", "litellm", "pandas")


def imported_by(
    tmp_path: Path,
    statement: str,
    *args: str | Path,
    site: Path | None = None,
    environ: dict[str, str] | None = None,
) -> tuple[int, set[str]]:
    """Exit code and imported modules of one fresh process running ``statement`` (with the
    distributions in ``site`` installed, when given, and ``environ`` set)."""
    report = tmp_path / "modules.json"
    env = {
        **os.environ,
        **({"PYTHONPATH": str(site)} if site is not None else {}),
        **(environ or {}),
    }
    subprocess.run(
        [sys.executable, "-c", PROBE, str(report), statement, *map(str, args)],
        cwd=REPO,
        env=env,
        check=False,
        capture_output=True,
        timeout=120,
    )
    payload = json.loads(report.read_text())
    return payload["exit"], set(payload["modules"])


def loaded(modules: set[str], *packages: str) -> list[str]:
    """The modules of ``packages`` (a package or any of its submodules) that were imported."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_help_imports_no_subcommand_module(tmp_path: Path) -> None:
    code, modules = imported_by(tmp_path, RUN_CLI, "--help")
    assert code == 0
    assert loaded(modules, "reflex_actions.cli") == [
        "reflex_actions.cli",
        "reflex_actions.cli.main",
    ]
    assert loaded(modules, *NEVER_NEEDED, "pydantic", "duckdb") == []


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (["control", "compile", SPEC], 0),
        (["control", "run", SPEC, "--snapshot", SNAPSHOT], 1),  # 2026-09-09 holds duplicates
    ],
    ids=["compile", "run"],
)
def test_control_commands_load_no_backtest_engine(
    tmp_path: Path, args: list[str | Path], exit_code: int
) -> None:
    """Compiling or running one control needs its kind's model, not the machinery that
    backtests it."""
    code, modules = imported_by(tmp_path, RUN_CLI, *args)
    assert code == exit_code
    needless = loaded(modules, *NEVER_NEEDED, "reflex_actions.backtest.engine")
    assert needless == []


def test_the_control_registry_loads_no_engine(tmp_path: Path) -> None:
    """Knowing the control types means loading every kind: none may start an engine to be
    defined (``control compile`` runs nothing)."""
    code, modules = imported_by(
        tmp_path,
        "from reflex_actions.controls import known_controls; print(sorted(known_controls()))",
    )
    assert code == 0
    assert "reflex_actions.kinds.stale_data" in modules  # every built-in kind was loaded
    needless = loaded(
        modules,
        *NEVER_NEEDED,
        "duckdb",
        "reflex_actions.executor",
        "reflex_actions.backtest.engine",
    )
    assert needless == []


@pytest.mark.parametrize("width", [50, 80, 200])
def test_help_lists_what_the_commands_themselves_say(width: int) -> None:
    """The summaries ``--help`` shows without importing equal those click derives from the
    imported commands, at any terminal width (where it cuts them differs)."""
    real = click.Group(
        cli.name,
        commands={name: cli.get_command(click.Context(cli), name) for name in COMMANDS},
        help=cli.help,
        context_settings=cli.context_settings,
        params=cli.params,
    )
    lazy_help = CliRunner().invoke(cli, ["--help"], terminal_width=width)
    real_help = CliRunner().invoke(real, ["--help"], terminal_width=width)
    assert lazy_help.exit_code == real_help.exit_code == 0
    assert "Commands:" in lazy_help.output
    assert lazy_help.output == real_help.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_summary_is_the_first_paragraph_of_the_command_help(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.help is not None
    first_paragraph = command.help.split("\n\n")[0]
    assert COMMANDS[name].summary == " ".join(first_paragraph.split())


def test_compiling_a_control_starts_no_engine(tmp_path: Path) -> None:
    """``control compile`` prints SQL: it runs no query, so it imports no DuckDB."""
    code, modules = imported_by(tmp_path, RUN_CLI, "control", "compile", SPEC)
    assert code == 0
    assert loaded(modules, "duckdb") == []


#: What a kind needs beyond its controls, and one control's run does not.
KIND_MACHINERY = ("reflex_actions.lessons", "reflex_actions.similarity", "reflex_actions.backtest")


def test_running_a_declared_control_loads_no_kind(tmp_path: Path) -> None:
    """With the built-in control types declared, running a uniqueness spec loads its control's
    module alone: no kind, nor what kinds need to draft and backtest lessons."""
    site = write_declarations(tmp_path / "site", *BUILT_IN)
    args = ["control", "run", SPEC, "--snapshot", SNAPSHOT]
    code, modules = imported_by(tmp_path, RUN_CLI, *args, site=site)
    assert code == 1  # 2026-09-09 holds duplicates: the control ran
    assert "reflex_actions.controls.uniqueness" in modules
    assert loaded(modules, "reflex_actions.kinds") == []
    assert "reflex_actions.registry" in modules
    assert loaded(modules, *KIND_MACHINERY) == []


def test_compiling_a_control_loads_its_module_and_no_kind(tmp_path: Path) -> None:
    """A control type lives in ``controls/``: compiling one loads its module and the registry,
    no kind's drafting (none of the eight kind modules)."""
    site = write_declarations(tmp_path / "site", *BUILT_IN)
    spec = tmp_path / "not_null.yaml"
    spec.write_text("type: not_null\nfield: transaction_id\n")
    code, modules = imported_by(tmp_path, RUN_CLI, "control", "compile", spec, site=site)
    assert code == 0
    assert loaded(modules, "reflex_actions.kinds") == []
    assert "reflex_actions.registry" in modules
    assert "reflex_actions.controls.not_null" in modules


def test_the_query_model_loads_no_sqlglot_to_be_imported(tmp_path: Path) -> None:
    """sqlglot is loaded where a tree is built, rendered or parsed, not where the query model
    or a control is imported (a run whose SQL is stored never builds a tree)."""
    code, modules = imported_by(
        tmp_path, "import reflex_actions.sql, reflex_actions.controls.uniqueness"
    )
    assert code == 0
    assert loaded(modules, "sqlglot") == []


def test_a_control_run_again_on_a_snapshot_of_the_same_shape_imports_no_sqlglot(
    tmp_path: Path,
) -> None:
    """The first run compiles and renders (sqlglot) and stores the SQL; the next run of the
    same spec on a snapshot of the same shape reads it back: no sqlglot, the same result."""
    args = ["control", "run", SPEC, "--snapshot", SNAPSHOT, "--json"]
    first_code, first = imported_by(tmp_path, RUN_CLI, *args)
    again_code, again = imported_by(tmp_path, RUN_CLI, *args)
    assert first_code == again_code == 1
    assert "sqlglot.generators.duckdb" in first
    assert loaded(again, "sqlglot") == []


def test_defining_every_kind_imports_no_sqlglot(tmp_path: Path) -> None:
    """A kind builds its trees when it compiles a control: loading every kind's module (what
    knowing the control types takes) imports no sqlglot."""
    code, modules = imported_by(
        tmp_path, "from reflex_actions.controls import known_controls; known_controls()"
    )
    assert code == 0
    assert "reflex_actions.kinds.invalid_values" in modules  # every built-in kind was loaded
    assert loaded(modules, "sqlglot") == []


def test_a_kind_s_control_run_again_imports_neither_sqlglot_nor_the_datahub_sdk(
    tmp_path: Path,
) -> None:
    """A ``value_range`` on a DOUBLE column, run again on a snapshot of the same shape, reads
    its SQL from the store: its control's module is loaded, not its kind's drafting (lessons,
    similarity, histories), nor sqlglot, nor the DataHub SDK. (``pydantic.json_schema`` is:
    pydantic imports it to define any model, a control's too.)"""
    snapshot = tmp_path / "amounts.parquet"
    pq.write_table(pa.table({"amount": pa.array([5.0, -1.0, float("nan"), None])}), snapshot)
    spec = tmp_path / "range.yaml"
    spec.write_text("type: value_range\nfield: amount\nmin: 0\nmax: 100\n")
    args = ["control", "run", spec, "--snapshot", snapshot, "--json"]
    store = {"REFLEX_CACHE_DIR": str(tmp_path / "cache")}
    first_code, first = imported_by(tmp_path, RUN_CLI, *args, environ=store)
    again_code, again = imported_by(tmp_path, RUN_CLI, *args, environ=store)
    assert first_code == again_code == 1  # -1 and the NaN are outside [0, 100]
    assert "sqlglot" in first and "reflex_actions.controls.values" in again
    drafting = (
        "reflex_actions.kinds.base",
        "reflex_actions.kinds.invalid_values",
        "reflex_actions.lessons",
        "reflex_actions.similarity",
    )
    assert loaded(again, "sqlglot", "datahub", *drafting) == []


#: Runs the CLI with the arguments after its first, and at exit, after every atexit handler the
#: CLI registers (they run last registered first), writes how many objects were frozen to the
#: file named by its first argument.
EXIT_PROBE = """
import atexit, gc, sys
report = sys.argv[1]
def record():
    with open(report, "w") as handle:
        handle.write(str(gc.get_freeze_count()))
atexit.register(record)
from reflex_actions.cli.main import cli
cli.main(sys.argv[2:], prog_name="datahub-reflex")
"""


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (["control", "compile", SPEC], 0),
        (["control", "run", SPEC, "--snapshot", SNAPSHOT], 1),
    ],
    ids=["compile", "run"],
)
def test_a_control_command_leaves_its_start_up_unfreed_at_exit(
    tmp_path: Path, args: list[str | Path], exit_code: int
) -> None:
    """The process ends without the interpreter freeing, one by one, the objects importing
    sqlglot, pydantic and DuckDB built (~100 ms of a run): they are frozen when it exits."""
    report = tmp_path / "frozen.txt"
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, str(report), *map(str, args)],
        cwd=REPO,
        check=False,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == exit_code, done.stderr.decode()[-2000:]
    assert int(report.read_text()) > 10_000  # the start-up's heap, not a handful of objects
