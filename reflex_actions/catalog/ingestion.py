"""What ingestion writes when data lands: the dataset's ``operation`` timeseries aspect.

A loader (or a platform's usage ingestion) announces new data with an INSERT ``operation``;
Reflex finds the data from it (see :mod:`reflex_actions.handlers.landing`): the snapshot file
in ``customProperties`` (``snapshot``, ``snapshot_id``) or the partition in ``partitionSpec``.
Used by ``steward land`` and the demo on the embedded store, where no loader runs.
"""

from __future__ import annotations

from pathlib import Path

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    OperationClass,
    OperationTypeClass,
    PartitionSpecClass,
    PartitionTypeClass,
)

from reflex_actions.catalog.steward import acting_as


def landed_operation(
    dataset_urn: str,
    landed: Path | str,
    actor: str,
    at_ms: int,
    snapshot_id: str | None = None,
) -> MetadataChangeProposalWrapper:
    """An INSERT announcing ``landed``: a snapshot file (a Path), named with its id (given, else
    the file name without its extension as in a history folder), so a control referencing
    another dataset pairs it by that id; or a table partition (a str)."""
    if isinstance(landed, Path):
        properties = {"snapshot": str(landed), "snapshot_id": snapshot_id or landed.stem}
        partition = None
    else:
        properties = None
        partition = PartitionSpecClass(partition=landed, type=PartitionTypeClass.PARTITION)
    operation = OperationClass(
        timestampMillis=at_ms,
        lastUpdatedTimestamp=at_ms,
        operationType=OperationTypeClass.INSERT,
        actor=actor,
        customProperties=properties,
        partitionSpec=partition,
    )
    return acting_as(actor, dataset_urn, operation)
