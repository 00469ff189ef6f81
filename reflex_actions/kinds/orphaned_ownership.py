"""Orphaned ownership after an employee leaves: datasets keep enough active owners
(``active_ownership``), evaluated when a user's status changes, not when data lands.

Words: owners, leavers, offboarding, suspended accounts. Evidence: the suspended users among
the source's owners and the users the incident names. Similar assets are ranked by the risk of
being orphaned next (owners left, shared owners, domain), not by schema.
"""

from __future__ import annotations

import re
from typing import Any

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import Control
from reflex_actions.controls.active_ownership import ACTIVE_STATUS, ActiveOwnershipControl
from reflex_actions.errors import ReflexError
from reflex_actions.kinds.base import LessonKind, MetadataReader, OwnerChange, StatusOf, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.models import (
    CatalogReader,
    Excluded,
    Signal,
    SimilarityQuery,
    shared_domain,
)
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.vocabulary import display_name

ORPHANED_OWNERSHIP = "orphaned_ownership"

OWNERSHIP_WORDS = re.compile(
    r"\b(owner(?:ship|s)?|left the company|leaver|offboard\w*|suspended|"
    r"orphan\w* (?:datasets?|tables?|assets?)|"
    r"nobody to (?:page|approve|contact))\b",
    re.IGNORECASE,
)
OWNER_TYPE_WORDS = {
    "TECHNICAL_OWNER": re.compile(r"technical owner", re.IGNORECASE),
    "DATA_STEWARD": re.compile(r"steward", re.IGNORECASE),
    "BUSINESS_OWNER": re.compile(r"business owner", re.IGNORECASE),
}
_USER_MENTION = re.compile(r"urn:li:corpuser:[\w.@-]+|\b[a-z][a-z0-9._-]{1,30}\b")
#: how many words of the incident are looked up as possible user names, at most
MAX_USER_LOOKUPS = 40


class OrphanedOwnershipKind(LessonKind):
    pattern = ORPHANED_OWNERSHIP
    title = "Orphaned ownership after an employee leaves"
    incident_words = OWNERSHIP_WORDS
    controls = (ActiveOwnershipControl,)
    triggers = frozenset({Trigger.USER_STATUS})
    estate_history = "ownership"

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        departed = _departed_users(text, facts)
        evidence = [
            *evidence,
            *(Evidence(source="catalog", quote=f"{u} is SUSPENDED") for u in departed),
        ]
        joined = " ".join(text.fields().values())
        owner_types = [t for t, pattern in OWNER_TYPE_WORDS.items() if pattern.search(joined)] or [
            "TECHNICAL_OWNER"
        ]
        name = display_name(facts.source.urn) if facts.source else "the dataset"
        who = ", ".join(display_name(u) for u in departed) or "an owner"
        return LessonDraft(
            failure_pattern=self.pattern,
            root_cause=f"{name} was orphaned when {who} left: it depended on a single active "
            f"{'/'.join(owner_types).lower().replace('_', ' ')}.",
            evidence=evidence,
            control={
                "type": "active_ownership",
                "min_active_owners": 1,
                "owner_types": owner_types,
            },
            confidence=0.85 if departed else 0.5,
            departed_users=departed,
            rationale="A departed user was the dataset's only owner of that type."
            if departed
            else "The incident describes lost ownership; no suspended user was identified.",
        )

    def follows_lineage(self) -> bool:
        return False  # ownership does not flow along lineage

    def candidate_lookups(
        self, query: SimilarityQuery, source: DatasetContext, catalog: CatalogReader
    ) -> list[list[str]]:
        owners = [*(o.owner for o in source.owners), *query.departed_users]
        return [catalog.datasets_by_owner(owner) for owner in dict.fromkeys(owners)]

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        control = _ownership_control(seen.query.control)
        departed = seen.query.departed_users
        return (
            ownership_signals(
                seen.source, seen.candidate, control, departed, seen.status_of, seen.config
            ),
            {},
        )

    def not_yet_covered_weight(self, config: SimilarityConfig) -> float:
        return config.ownership_weights.not_yet_covered

    def rows_on_user_status(
        self, control: Control, dataset: DatasetContext, reader: MetadataReader
    ) -> list[dict[str, Any]]:
        """The dataset's ownership now, in the control's ownership-snapshot shape."""
        c = _ownership_control(control).columns
        edges = [
            {
                c.dataset: dataset.urn,
                c.owner: o.owner,
                c.ownership_type: o.ownership_type,
                c.owner_status: _status(o.owner, reader),
            }
            for o in dataset.owners
        ]
        return edges or [
            {c.dataset: dataset.urn, c.owner: None, c.ownership_type: None, c.owner_status: None}
        ]

    def owner_change(
        self, control: Control, dataset: DatasetContext, departed: str, reader: MetadataReader
    ) -> OwnerChange | None:
        """An active owner of the dataset's domain, else the departed user's team, else another
        active owner of the dataset itself."""
        owner_types = _ownership_control(control).owner_types or ["TECHNICAL_OWNER"]
        kind = owner_types[0]
        if dataset.domain:
            ranked = sorted(
                (o for o in reader.owners_of(dataset.domain) if o.owner != departed),
                key=lambda o: o.ownership_type not in owner_types,
            )
            for owner in ranked:
                if _status(owner.owner, reader) == ACTIVE_STATUS:
                    return OwnerChange(
                        owner.owner,
                        kind,
                        f"{display_name(owner.owner)} is an active {owner.ownership_type} "
                        f"of domain {display_name(dataset.domain)}",
                    )
        groups = reader.groups_of(departed)
        if groups:
            reason = f"{display_name(groups[0])} is the team {display_name(departed)} belonged to"
            return OwnerChange(groups[0], kind, reason)
        for owner in dataset.owners:
            if owner.owner != departed and _status(owner.owner, reader) == ACTIVE_STATUS:
                reason = f"{display_name(owner.owner)} already owns it as {owner.ownership_type}"
                return OwnerChange(owner.owner, kind, reason)
        return None


def _ownership_control(control: Control) -> ActiveOwnershipControl:
    if not isinstance(control, ActiveOwnershipControl):
        raise ReflexError(f"{ORPHANED_OWNERSHIP} evaluates active_ownership controls")
    return control


def _status(owner: str, reader: MetadataReader) -> str | None:
    """Groups do not leave: a corpGroup owner counts as active."""
    return ACTIVE_STATUS if owner.startswith("urn:li:corpGroup:") else reader.user_status(owner)


def _departed_users(text: IncidentText, facts: IncidentFacts) -> list[str]:
    """Suspended users among the source's owners and the users the incident names."""
    mentioned: dict[str, None] = {}
    for match in _USER_MENTION.finditer(" ".join(text.fields().values())):
        token = match.group(0)
        mentioned[token if token.startswith("urn:li:") else f"urn:li:corpuser:{token}"] = None
    owners = [o.owner for o in facts.source.owners] if facts.source else []
    looked_up = list(dict.fromkeys([*owners, *list(mentioned)[:MAX_USER_LOOKUPS]]))
    return [user for user in looked_up if facts.catalog.user_status(user) == "SUSPENDED"]


def owners_by_status(
    candidate: DatasetContext,
    control: ActiveOwnershipControl,
    status_of: StatusOf,
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
    status_of: StatusOf,
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
