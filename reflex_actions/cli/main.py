"""Entry point of the ``datahub-reflex`` console script."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, NamedTuple

import click

from reflex_actions import __version__


class LazyCommand(NamedTuple):
    """Where a subcommand lives, and what ``--help`` says of it without importing it."""

    #: "module:attribute"
    target: str
    #: the first paragraph of the command's help (a test holds it to the real one)
    summary: str


#: command name -> its lazy entry. Modules are imported only when their command runs: the
#: DataHub SDK alone takes over a second to import, which `control run` and `--help` should
#: not pay.
COMMANDS = {
    "control": LazyCommand("reflex_actions.cli.control:control", "Compile and run controls."),
    "backtest": LazyCommand(
        "reflex_actions.cli.backtest:backtest_command",
        "Backtest a control SPEC on historical snapshots and report precision, recall, coverage.",
    ),
    "init": LazyCommand(
        "reflex_actions.cli.catalog:init_command",
        "Create Reflex's structured properties and the lessons glossary node (idempotent).",
    ),
    "load": LazyCommand(
        "reflex_actions.cli.catalog:load_command",
        "Load a metadata file (the MCP JSON `datahub ingest` reads) into the embedded store.",
    ),
    "steward": LazyCommand(
        "reflex_actions.cli.catalog:steward",
        "Act as a steward on the embedded store (what the DataHub UI does on a server).",
    ),
    "lessons": LazyCommand(
        "reflex_actions.cli.lessons:lessons",
        "List the lessons in the store (state, pattern, version, scope, recurrences), or show one.",
    ),
    "demo": LazyCommand(
        "reflex_actions.cli.catalog:demo_command",
        "Run the whole loop on the embedded store, every scenario or the one named; exit 0 if "
        "each closes its loop (incident A -> control -> incident B on another dataset).",
    ),
    "export": LazyCommand(
        "reflex_actions.cli.controls_as_code:export_command",
        "Write each published lesson as one reviewable YAML file in FOLDER (created if needed).",
    ),
    "diff": LazyCommand(
        "reflex_actions.cli.controls_as_code:diff_command",
        "Show how the lesson files in FOLDER differ from the store's published lessons; exit 1 "
        "if they differ, 0 if not.",
    ),
    "propose": LazyCommand(
        "reflex_actions.cli.controls_as_code:propose_command",
        "Propose each changed lesson file in FOLDER as its lesson's next version.",
    ),
    "site": LazyCommand(
        "reflex_actions.cli.site:site_command",
        "Write a static HTML view of the embedded store into DIRECTORY.",
    ),
    "status": LazyCommand(
        "reflex_actions.cli.status:status_command",
        "Show how many events the pipeline has still to deliver; exit 1 unless caught up.",
    ),
    "evaluate": LazyCommand(
        "reflex_actions.cli.evaluate:evaluate_command",
        "Judge the scheduled controls (stale data) that are due; exit 1 if any failed.",
    ),
}


# Reflex's commands do not phone home: no DataHub SDK usage telemetry unless asked for.
os.environ.setdefault("DATAHUB_TELEMETRY_ENABLED", "false")


#: Longest usage error shown (an argument can be as long as the shell allows).
MAX_USAGE_ERROR_CHARS = 500


class OneLineUsageError(click.UsageError):
    """A usage error (a missing argument, an option's bad value) said on one line, as every
    bad input is, not after the command's usage: ``--help`` has that."""

    def show(self, file: IO[Any] | None = None) -> None:
        # collapsed and cut here: reflex_actions.bounded imports pydantic, which --help need not
        message = " ".join(self.format_message().split())[:MAX_USAGE_ERROR_CHARS]
        click.echo(f"error: {message}", file=file, err=True)


@contextmanager
def _one_line_usage() -> Iterator[None]:
    try:
        yield
    except (OneLineUsageError, click.exceptions.NoArgsIsHelpError):
        raise  # already one line; or a group given no command, which shows its help
    except click.UsageError as error:
        raise OneLineUsageError(error.format_message(), error.ctx) from None


class LazyGroup(click.Group):
    """A command group that imports each subcommand on first use, and says each usage error
    of any of its commands on one line."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _one_line_usage():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _one_line_usage():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute = entry.target.split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands from their summaries: click lays them out as it would the
        imported commands, and ``--help`` imports none of them."""
        listing = click.Group(
            commands=[click.Command(name, help=entry.summary) for name, entry in COMMANDS.items()]
        )
        listing.format_commands(ctx, formatter)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="datahub-reflex")
def cli() -> None:
    """DataHub Reflex: turn resolved incidents into tested, reusable preventive controls."""
