"""``datahub-reflex evaluate --due``: judge the scheduled controls that are due, from cron.

It reads the same pipeline file ``datahub actions -c`` runs (its ``action.config`` block and,
for a DataHub server, its ``datahub`` block), so cron and the running action judge alike.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from datahub.configuration.config_loader import EnvResolver
from pydantic import ValidationError

from reflex_actions.bounded import BoundedYamlError, load_bounded_yaml
from reflex_actions.catalog.registry import open_store
from reflex_actions.cli.output import EXIT_CHECK_FAILED, EXIT_OK, print_json, reports_bad_input
from reflex_actions.config import ReflexConfig
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.scheduled import on_schedule
from reflex_actions.times import now_ms, parse_duration, parse_instant

#: Longest pipeline file read (characters).
MAX_PIPELINE_CHARS = 1024 * 1024


def load_pipeline(path: Path) -> dict[str, Any]:
    """A datahub-actions pipeline file, bounded, with its ``${VAR:-default}`` resolved."""
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_PIPELINE_CHARS + 1)
        data = load_bounded_yaml(text, str(path), MAX_PIPELINE_CHARS, max_depth=16)
    except (OSError, UnicodeDecodeError, BoundedYamlError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ReflexError(f"cannot read {path}: {reason}") from None
    if not isinstance(data, dict):
        raise ReflexError(f"{path} is not a pipeline (a mapping with an `action` block)")
    resolved: dict[str, Any] = EnvResolver(os.environ).resolve(data)
    return resolved


def reflex_config(pipeline: dict[str, Any], path: Path) -> ReflexConfig:
    action = pipeline.get("action")
    if not isinstance(action, dict) or action.get("type") != "reflex":
        raise ReflexError(f"{path} has no `action` block of type reflex")
    try:
        return ReflexConfig.model_validate(action.get("config") or {})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ReflexError(f"{path}: action.config.{where}: {first['msg']}") from None


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
    sys.exit(EXIT_CHECK_FAILED if counts.failed else EXIT_OK)
