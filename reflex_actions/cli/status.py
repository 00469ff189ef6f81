"""``datahub-reflex status``: has the pipeline delivered every event in its store?

It reads the pipeline file ``datahub actions -c`` runs and asks its source where it stands: the
``reflex-lite`` source's offset file against the embedded store, or the ``kafka`` source's
consumer group (the pipeline's name) against its topics' high watermarks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
from datahub_actions.plugin.source.kafka.kafka_event_source import KafkaEventSourceConfig

from reflex_actions.bounded import excerpt, validated
from reflex_actions.cli.output import EXIT_CHECK_FAILED, EXIT_OK, print_json, reports_bad_input
from reflex_actions.cli.pipeline_file import load_pipeline
from reflex_actions.cli.store import DEFAULT_STORE
from reflex_actions.errors import ReflexError
from reflex_actions.source.kafka_lag import group_lag
from reflex_actions.source.lite_change_feed.lite_change_feed_source import (
    LiteChangeFeedConfig,
    feed_status,
)
from reflex_actions.wording import plural


def _lite_status(config: LiteChangeFeedConfig) -> tuple[dict[str, Any], str]:
    """The reflex-lite source's standing, as JSON and as one line."""
    status = feed_status(config)
    running = status.running is not None
    payload = {
        "source": "reflex-lite",
        "store": str(status.store),
        "offset_file": str(status.offset_file),
        "newest_row": status.newest_row,
        "offset": status.offset,
        "acked": status.acked,
        "behind": status.behind,
        "caught_up": status.behind == 0,
        "running": running,
        "pid": int(status.running) if status.running else None,
    }
    standing = "caught up" if status.behind == 0 else f"{plural(status.behind, 'event')} behind"
    pipeline = (
        f"a pipeline is running (process {status.running or '?'})"
        if running
        else "no pipeline is running"
    )
    line = (
        f"{status.store}: {standing} (newest row {status.newest_row}, delivered up to "
        f"{status.offset} + {status.acked} acked after it); {pipeline}"
    )
    return payload, line


def _kafka_status(pipeline: dict[str, Any], config: Any, path: Path) -> tuple[dict[str, Any], str]:
    """The kafka source's consumer group lag, as JSON and as one line."""
    group = pipeline.get("name")
    if not isinstance(group, str) or not group:
        raise ReflexError(f"{path} has no pipeline `name` (the kafka consumer group)")
    lag = group_lag(group, validated(KafkaEventSourceConfig, config, f"{path}: source.config"))
    behind = lag.behind
    payload = {
        "source": "kafka",
        "bootstrap": lag.bootstrap,
        "group": lag.group,
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed": p.committed,
                "high_watermark": p.high_watermark,
                "lag": p.lag,
            }
            for p in lag.partitions
        ],
        "behind": behind,
        "caught_up": None if behind is None else behind == 0,
        "running": lag.running,
    }
    if behind is None:
        unknown = [f"{p.topic}[{p.partition}]" for p in lag.partitions if p.lag is None]
        standing = (
            f"lag unknown: the broker reports high watermarks below its log on {', '.join(unknown)}"
        )
    else:
        standing = "caught up" if behind == 0 else f"{plural(behind, 'event')} behind"
    pipeline_state = {True: "a pipeline is consuming", False: "no pipeline is consuming"}.get(
        lag.running, "the broker does not say whether a pipeline is consuming"
    )
    return payload, f"consumer group {lag.group}: {standing}; {pipeline_state}"


def _pipeline_status(path: Path) -> tuple[dict[str, Any], str]:
    """The standing of the source the pipeline file ``path`` names."""
    pipeline = load_pipeline(path)
    source = pipeline.get("source")
    if not isinstance(source, dict):
        raise ReflexError(f"{path} has no `source` block")
    kind, config = source.get("type"), source.get("config")
    if kind == "reflex-lite":
        return _lite_status(validated(LiteChangeFeedConfig, config, f"{path}: source.config"))
    if kind == "kafka":
        return _kafka_status(pipeline, config, path)
    raise ReflexError(
        f"{path}: source type {excerpt(kind)} is not one status reads (reflex-lite, kafka)"
    )


@click.command("status")
@click.option(
    "-c",
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    help="The pipeline file the pipeline runs with (action_configs/reflex-embedded.yaml).",
)
@click.option(
    "--store",
    type=click.Path(),
    help=f"Without -c: the embedded store, with its default offset file "
    f"[default: $REFLEX_STORE or {DEFAULT_STORE}].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the standing as JSON.")
@reports_bad_input
def status_command(config_file: Path | None, store: str | None, as_json: bool) -> None:
    """Show how many events the pipeline has still to deliver; exit 1 unless caught up.

    Exit 0 when the pipeline's source has delivered every event of its store (or topics), 1
    when it has not or cannot tell, 2 on bad input.
    """
    if config_file is not None and store is not None:
        raise ReflexError("give -c PIPELINE or --store, not both (the pipeline names its store)")
    if config_file is not None:
        payload, line = _pipeline_status(config_file)
    else:
        path = store or os.environ.get("REFLEX_STORE", DEFAULT_STORE)
        payload, line = _lite_status(LiteChangeFeedConfig(store=path))
    if as_json:
        print_json(payload)
    else:
        click.echo(line)
    sys.exit(EXIT_OK if payload["caught_up"] else EXIT_CHECK_FAILED)
