"""Where a landed snapshot is, and whether Reflex may read it (the landing allowed roots)."""

from __future__ import annotations

from pathlib import Path

from datahub.metadata.schema_classes import OperationClass

from reflex_actions.bounded import excerpt
from reflex_actions.config import LandingConfig
from reflex_actions.errors import ReflexError

DEFAULT_PARTITION = "FULL_TABLE_SNAPSHOT"


class SnapshotRefused(ReflexError):
    """The landed snapshot cannot be located, or lies outside the allowed roots."""


def locate_snapshot(
    operation: OperationClass, dataset_name: str, platform: str, landing: LandingConfig
) -> tuple[Path, str]:
    """The landed snapshot's path and id, restricted to the configured allowed roots."""
    properties = operation.customProperties or {}
    partition = operation.partitionSpec.partition if operation.partitionSpec else DEFAULT_PARTITION
    snapshot_id = properties.get("snapshot_id") or (
        partition if partition != DEFAULT_PARTITION else ""
    )
    if properties.get("snapshot"):
        path = Path(properties["snapshot"])
    elif landing.locator and snapshot_id:
        path = Path(
            landing.locator.format(name=dataset_name, platform=platform, snapshot_id=snapshot_id)
        )
    else:
        raise SnapshotRefused(
            "the operation names no snapshot (customProperties.snapshot or snapshot_id) "
            "and no landing locator is configured"
        )
    try:
        resolved = path.resolve()
    except (OSError, ValueError):  # a NUL byte, a symlink loop
        raise SnapshotRefused(f"snapshot path {excerpt(str(path))} cannot be resolved") from None
    if not any(resolved.is_relative_to(root.resolve()) for root in landing.allowed_roots):
        raise SnapshotRefused(f"snapshot {excerpt(str(path))} is outside the allowed roots")
    # The snapshot reader reads exactly this resolved file (glob characters escaped).
    return resolved, snapshot_id or resolved.stem
