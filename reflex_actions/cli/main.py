"""Entry point of the ``datahub-reflex`` console script."""

from __future__ import annotations

import importlib
import os

import click

from reflex_actions import __version__

#: command name -> "module:attribute". Modules are imported only when their command runs: the
#: DataHub SDK alone takes over a second to import, which `control run` should not pay.
COMMANDS = {
    "control": "reflex_actions.cli.control:control",
    "backtest": "reflex_actions.cli.backtest:backtest_command",
    "init": "reflex_actions.cli.catalog:init_command",
    "load": "reflex_actions.cli.catalog:load_command",
    "steward": "reflex_actions.cli.catalog:steward",
    "demo": "reflex_actions.cli.catalog:demo_command",
    "evaluate": "reflex_actions.cli.evaluate:evaluate_command",
}


# Reflex's commands do not phone home: no DataHub SDK usage telemetry unless asked for.
os.environ.setdefault("DATAHUB_TELEMETRY_ENABLED", "false")


class LazyGroup(click.Group):
    """A command group that imports each subcommand on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="datahub-reflex")
def cli() -> None:
    """DataHub Reflex: turn resolved incidents into tested, reusable preventive controls."""
