"""Data landed (an ``operation``): run the covered dataset's controls that read it, where it
landed; a failure raises incident B. Every run ends with its run event."""

from __future__ import annotations

import logging

from datahub.metadata.schema_classes import OperationClass

from reflex_actions.engines.base import Engine, EngineError, Target
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.landing import SnapshotRefused
from reflex_actions.handlers.runs import covered_controls, landed_data, record_run, run_on_target
from reflex_actions.kinds.base import Trigger
from reflex_actions.times import believed_time

logger = logging.getLogger(__name__)


def on_operation(change: AspectChange, ctx: HandlerContext) -> None:
    """Data landed: run the controls that read it where it landed: the snapshot file the
    operation names, else, on a platform with an engine, the table (or the partition named)."""
    covered = [
        c
        for c in covered_controls(change.urn, ctx, change.time_ms, Trigger.LANDED_DATA)
        if c.control.reads_data()
    ]
    if not covered:
        return
    operation = change.typed(OperationClass)
    dataset = ctx.catalog.dataset(change.urn)
    if operation is None or dataset is None:
        return
    landed: tuple[Engine | None, Target] | None = None
    refused: str | None = None
    snapshot_id = f"refused-{operation.timestampMillis}"
    try:
        landed, snapshot_id = landed_data(operation, change.urn, ctx)
    except (SnapshotRefused, EngineError) as refusal:
        logger.warning("not running controls on %s: %s", change.urn, refusal)
        refused = str(refusal)
    if landed is None and refused is None:
        logger.debug("operation on %s names no snapshot and its platform has no engine", change.urn)
        return
    landed_at = believed_time(
        operation.timestampMillis, ctx.clock(), f"an operation on {change.urn}"
    )
    for item in covered:
        if item.judged(snapshot_id):
            continue
        result, error = None, refused
        if landed is not None:
            result, error = run_on_target(
                item, change.urn, landed, snapshot_id, ctx, as_of_ms=landed_at
            )
        record_run(
            item,
            change.urn,
            ctx,
            time_ms=landed_at,
            run_id=snapshot_id,
            result=result,
            error=error,
        )
