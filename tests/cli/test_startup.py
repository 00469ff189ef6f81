"""CLI start-up: what each command path imports, checked in fresh processes (no timing).

``--help`` must list the commands without importing them (one of them loads the DataHub SDK),
and no CLI path may load the DataHub SDK, litellm or pandas unless its work needs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reflex_actions.cli.main import COMMANDS, cli

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "action_configs" / "controls" / "unique_transaction_id.yaml"
SNAPSHOT = REPO / "snapshots" / "finance.payments" / "2026-09-09.parquet"

#: Runs the CLI with the given arguments in this interpreter, then writes the names of the
#: modules it imported (and its exit code) to the file named by the first argument.
PROBE = """
import json, sys
report, args = sys.argv[1], sys.argv[2:]
from reflex_actions.cli.main import cli
try:
    cli.main(args, prog_name="datahub-reflex")
except SystemExit as stop:
    code = stop.code
with open(report, "w") as handle:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, handle)
"""

#: Packages no start-up path below needs: the DataHub SDK, the LLM client, dataframes.
NEVER_NEEDED = ("datahub", "litellm", "pandas")


def imported_by(tmp_path: Path, *args: str | Path) -> tuple[int, set[str]]:
    """Exit code and imported modules of one fresh ``datahub-reflex ARGS`` process."""
    report = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", PROBE, str(report), *map(str, args)],
        cwd=REPO,
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
    code, modules = imported_by(tmp_path, "--help")
    assert code == 0
    assert loaded(modules, "reflex_actions.cli") == [
        "reflex_actions.cli",
        "reflex_actions.cli.main",
    ]
    assert loaded(modules, *NEVER_NEEDED, "pydantic", "duckdb") == []


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
