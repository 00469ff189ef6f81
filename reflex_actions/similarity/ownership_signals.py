"""Scoring a candidate for an ownership control: how likely it is to be orphaned next."""

from __future__ import annotations

from collections.abc import Callable

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls.active_ownership import ACTIVE_STATUS, ActiveOwnershipControl
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.models import Excluded, Signal, shared_domain
from reflex_actions.vocabulary import display_name


def active_owners(
    candidate: DatasetContext,
    control: ActiveOwnershipControl,
    status_of: Callable[[str], str | None],
) -> list[str]:
    """Distinct owners of the counted types whose user status is ACTIVE."""
    counted = [
        o.owner
        for o in candidate.owners
        if control.owner_types is None or o.ownership_type in control.owner_types
    ]
    return [owner for owner in dict.fromkeys(counted) if status_of(owner) == ACTIVE_STATUS]


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
    active = active_owners(candidate, control, status_of)
    names = ", ".join(display_name(owner) for owner in active)
    signals: list[Signal] = []
    if not active:
        signals.append(
            Signal(
                name="no_active_owner",
                contribution=weights.no_active_owner,
                reason=f"no active {kinds} now",
            )
        )
    elif len(active) <= control.min_active_owners:
        signals.append(
            Signal(
                name="single_active_owner",
                contribution=weights.single_active_owner,
                reason=f"only {len(active)} active {kinds} ({names}): one departure orphans it",
            )
        )
    else:
        raise Excluded(f"{len(active)} active {kinds}s ({names}): not at risk")
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
