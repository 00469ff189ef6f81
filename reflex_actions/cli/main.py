"""Entry point of the ``datahub-reflex`` console script."""

from __future__ import annotations

import click

from reflex_actions import __version__
from reflex_actions.cli.backtest import backtest_command
from reflex_actions.cli.catalog import init_command, load_command, steward
from reflex_actions.cli.control import control


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="datahub-reflex")
def cli() -> None:
    """DataHub Reflex: turn resolved incidents into tested, reusable preventive controls."""


cli.add_command(control)
cli.add_command(backtest_command)
cli.add_command(init_command)
cli.add_command(load_command)
cli.add_command(steward)
