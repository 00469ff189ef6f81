"""Scoring a candidate for an ownership control: how likely it is to be orphaned next."""

from __future__ import annotations

from collections.abc import Callable

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls.active_ownership import ACTIVE_STATUS, ActiveOwnershipControl
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.models import Excluded, Signal, shared_domain
from reflex_actions.vocabulary import display_name


def owners_by_status(
    candidate: DatasetContext,
    control: ActiveOwnershipControl,
    status_of: Callable[[str], str | None],
) -> tuple[list[str], list[str]]:
    """Distinct owners of the counted types that are ACTIVE, and those of unknown status (no
    corpUserStatus: neither active nor departed); departed owners are in neither list."""
    counted = [
        o.owner
        for o in candidate.owners
        if control.owner_types is None or o.ownership_type in control.owner_types
    ]
    active, unknown = [], []
    for owner in dict.fromkeys(counted):
        status = status_of(owner)
        if status == ACTIVE_STATUS:
            active.append(owner)
        elif not status:
            unknown.append(owner)
    return active, unknown


def ownership_signals(
    source: DatasetContext,
    candidate: DatasetContext,
    control: ActiveOwnershipControl,
    departed_users: tuple[str, ...],
    status_of: Callable[[str], str | None],
    config: SimilarityConfig,
) -> list[Signal]:
    weights = config.ownership_weights
    kinds = "/".join(control.owner_types) if control.owner_types else "owner"
    active, unknown = owners_by_status(candidate, control, status_of)
    names = ", ".join(display_name(owner) for owner in active)
    if unknown:
        names += (", " if names else "") + ", ".join(
            f"{display_name(owner)} (status unknown)" for owner in unknown
        )
    remaining = len(active) + len(unknown)
    signals: list[Signal] = []
    if not remaining:
        signals.append(
            Signal(
                name="no_active_owner",
                contribution=weights.no_active_owner,
                reason=f"no active {kinds} now",
            )
        )
    elif remaining <= control.min_active_owners:
        signals.append(
            Signal(
                name="single_active_owner",
                contribution=weights.single_active_owner,
                reason=f"only {remaining} active {kinds} ({names}): one departure orphans it",
            )
        )
    else:
        raise Excluded(f"{remaining} active {kinds}s ({names}): not at risk")
    related = {o.owner for o in source.owners} | set(departed_users)
    shared = sorted(related & {o.owner for o in candidate.owners})
    if shared:
        signals.append(
            Signal(
                name="shares_owner",
                contribution=weights.shares_owner,
                reason=f"owned by {', '.join(display_name(o) for o in shared)} like the source",
            )
        )
    signals += shared_domain(source, candidate, weights.shared_domain)
    return signals
