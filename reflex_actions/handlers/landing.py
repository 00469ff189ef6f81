"""Where a landed snapshot is, and whether Reflex may read it (the landing allowed roots)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from datahub.metadata.schema_classes import OperationClass

from reflex_actions.backtest.history import History
from reflex_actions.bounded import excerpt
from reflex_actions.config import LandingConfig, dataset_folder
from reflex_actions.controls import Control
from reflex_actions.errors import ReflexError
from reflex_actions.executor import ReferenceSnapshot
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.vocabulary import display_name

DEFAULT_PARTITION = "FULL_TABLE_SNAPSHOT"


class SnapshotRefused(ReflexError):
    """The landed snapshot cannot be located, or lies outside the allowed roots."""


def locate_snapshot(
    operation: OperationClass, dataset_urn: str, landing: LandingConfig
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
        path = _located(landing.locator, dataset_urn, snapshot_id)
    else:
        raise SnapshotRefused(
            "the operation names no snapshot (customProperties.snapshot or snapshot_id) "
            "and no landing locator is configured"
        )
    resolved = within_allowed_roots(path, landing)
    return resolved, snapshot_id or resolved.stem


def _located(locator: str, dataset_urn: str, snapshot_id: str) -> Path:
    """Where the landing locator puts the dataset's snapshot of that id (named as its history
    folder is)."""
    located = dataset_folder(locator, dataset_urn, snapshot_id=snapshot_id)
    if located is None:
        raise SnapshotRefused(f"{excerpt(dataset_urn)} is not a dataset urn: no landing locator")
    return Path(located)


def within_allowed_roots(path: Path, landing: LandingConfig) -> Path:
    """The resolved path, if it lies under an allowed root; the snapshot reader reads exactly
    this resolved file (glob characters escaped)."""
    try:
        resolved = path.resolve()
    except (OSError, ValueError):  # a NUL byte, a symlink loop
        raise SnapshotRefused(f"snapshot path {excerpt(str(path))} cannot be resolved") from None
    if not any(resolved.is_relative_to(root.resolve()) for root in landing.allowed_roots):
        raise SnapshotRefused(f"snapshot {excerpt(str(path))} is outside the allowed roots")
    return resolved


def parent_snapshot(
    control: Control,
    snapshot_id: str,
    landing: LandingConfig,
    history_of: Callable[[str], History | None],
) -> ReferenceSnapshot | None:
    """The parent snapshot a landed child snapshot is checked against, for a control that
    references another dataset: the parent's landed snapshot with the same id (by the landing
    locator, within the allowed roots), else its history's snapshot with that id or the latest
    one before it. Raise SnapshotRefused when there is none."""
    target = control.referenced()
    if target is None:
        return None
    if landing.locator and snapshot_id:
        try:
            landed = _located(landing.locator, target.dataset, snapshot_id)
            resolved = within_allowed_roots(landed, landing)
        except SnapshotRefused:
            resolved = None
        if resolved is not None and resolved.is_file():
            return ReferenceSnapshot(SnapshotFile.from_path(resolved), "the same snapshot id")
    parent_history = history_of(target.dataset)
    paired = parent_history.snapshot_for(snapshot_id) if parent_history else None
    if paired is None:
        raise SnapshotRefused(
            f"{display_name(target.dataset)}, the dataset this control references, has no snapshot "
            f"{excerpt(snapshot_id)} or earlier"
        )
    return ReferenceSnapshot(*paired)
