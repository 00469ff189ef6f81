"""``datahub-reflex evaluate --due``: judge the scheduled controls that are due, from cron.

It reads the same pipeline file ``datahub actions -c`` runs (its ``action.config`` block and,
for a DataHub server, its ``datahub`` block), so cron and the running action judge alike.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from reflex_actions.bounded import validated
from reflex_actions.catalog.registry import open_store
from reflex_actions.cli.lessons import terminal_text
from reflex_actions.cli.output import EXIT_CHECK_FAILED, EXIT_OK, print_json, reports_bad_input
from reflex_actions.cli.pipeline_file import load_pipeline
from reflex_actions.config import ReflexConfig
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.scheduled import on_schedule
from reflex_actions.times import iso, now_ms, parse_duration, parse_instant


def reflex_config(pipeline: dict[str, Any], path: Path) -> ReflexConfig:
    action = pipeline.get("action")
    if not isinstance(action, dict) or action.get("type") != "reflex":
        raise ReflexError(f"{path} has no `action` block of type reflex")
    return validated(ReflexConfig, action.get("config"), f"{path}: action.config")


def _graph(pipeline: dict[str, Any]) -> Any:
    from datahub.ingestion.graph.client import DatahubClientConfig, DataHubGraph

    server = pipeline.get("datahub")
    if not isinstance(server, dict) or not isinstance(server.get("server"), str):
        raise ReflexError(
            "the pipeline has no `datahub: {server: ...}` block to reach DataHub with "
            "(or set action.config.store for the embedded store)"
        )
    return DataHubGraph(
        DatahubClientConfig(server=server["server"], token=server.get("token") or None)
    )


@click.command("evaluate")
@click.option("--due", is_flag=True, required=True, help="Judge what is due now.")
@click.option(
    "-c",
    "--config",
    "config_file",
    required=True,
    type=click.Path(path_type=Path),
    help="The pipeline file the action runs with (action_configs/reflex.yaml).",
)
@click.option("--as-of", help="Judge as of this time (ISO 8601; no zone = UTC); default now.")
@click.option("--interval", help="The schedule's interval (e.g. 1h); default schedule.interval.")
@click.option("--json", "as_json", is_flag=True, help="Print what the sweep did as JSON.")
@reports_bad_input
def evaluate_command(
    due: bool, config_file: Path, as_of: str | None, interval: str | None, as_json: bool
) -> None:
    """Judge the scheduled controls (stale data) that are due; exit 1 if any failed."""
    pipeline = load_pipeline(config_file)
    config = reflex_config(pipeline, config_file)
    seconds = parse_duration(interval) if interval else config.schedule.interval_seconds
    if seconds is None:
        raise ReflexError(
            f"{config_file} sets no action.config.schedule.interval: give --interval (e.g. 1h)"
        )
    at = parse_instant(as_of) if as_of else now_ms()
    graph = _graph(pipeline) if config.catalog_store() == "datahub" else None
    catalog, config = open_store(config, graph)
    try:
        counts = on_schedule(HandlerContext(catalog=catalog, config=config), at, seconds)
    finally:
        catalog.close()
    if as_json:
        print_json(asdict(counts))
    else:
        click.echo(
            f"judged {counts.judged}, failed {counts.failed}, errors {counts.errors}, "
            f"not due {counts.skipped}"
        )
        for lesson in counts.not_in_force:
            click.echo(
                f"not judged: {terminal_text(lesson.lesson)} was not yet published at "
                f"{iso(at)} (in force since {lesson.in_force_since})"
            )
    sys.exit(EXIT_CHECK_FAILED if counts.failed else EXIT_OK)
