"""Who may pass a human gate (DESIGN §9): a configured approver user, a member of a
configured approver group, or an owner of the lesson's glossary term; never Reflex itself, and
no one when the store authenticates no one (unless the operator trusts it). A fact that grants
the right counts only when someone other than the person it empowers wrote it."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from datahub.metadata.schema_classes import (
    GroupMembershipClass,
    NativeGroupMembershipClass,
    OwnershipClass,
)

from reflex_actions.catalog.base import AspectT, Catalog
from reflex_actions.config import ReflexConfig

logger = logging.getLogger(__name__)

#: Why a decision is refused when DataHub authenticates no one (DESIGN §9).
UNAUTHENTICATED = (
    "DataHub does not authenticate its callers (metadata-service authentication is off), so "
    "the actor it recorded proves nothing; turn authentication on, or set "
    "trust_unauthenticated_actors: true to accept such decisions"
)


@dataclass(frozen=True)
class Gatekeeper:
    """Decides who may pass the human gates, from what the store authenticated and recorded."""

    catalog: Catalog
    config: ReflexConfig
    #: whether the store authenticates whoever writes to it, so that the actor it records is
    #: the one who wrote (the embedded store's file permissions are its boundary; a DataHub
    #: server with metadata-service authentication off authenticates no one)
    actors_authenticated: bool = True

    def is_own(self, actor: str | None) -> bool:
        """Whether DataHub recorded this write as Reflex's own (DESIGN §9)."""
        return actor == self.config.service_actor or actor in self.config.own_actors

    def refusal(self, actor: str | None, lesson_urn: str) -> str | None:
        """Why ``actor`` may not pass a human gate of this lesson, or None when they may.

        Authorized: a configured approver user, a member of a configured approver group, or
        an owner of the lesson's glossary term; never Reflex's own service actor, and no one
        when the store authenticates no one (unless the operator trusts it). A fact that
        grants the right — a group membership, an ownership of the term — counts only when
        someone other than the person it empowers wrote it.
        """
        if not actor:
            return "the change names no actor"
        if self.is_own(actor):
            return "Reflex's own writes never pass a human gate"
        if not self.actors_authenticated and not self.config.trust_unauthenticated_actors:
            return UNAUTHENTICATED
        approvers = self.config.approvers
        if actor in approvers.users:
            return None
        if approvers.groups and set(self._trusted_groups(actor)) & set(approvers.groups):
            return None
        ownership = self.catalog.get_aspect(lesson_urn, OwnershipClass)
        if ownership and actor in {owner.owner for owner in ownership.owners}:
            if self.catalog.aspect_writer(lesson_urn, OwnershipClass) != actor:
                return None
            return (
                f"{actor} owns {lesson_urn} only because they wrote that ownership themselves; "
                "an owner counts when someone else (an admin, ingestion, Reflex) made them one"
            )
        return f"{actor} is not an approver and does not own {lesson_urn}"

    def _trusted_groups(self, actor: str) -> list[str]:
        """The groups ``actor`` belongs to, from identity-provider groups and groups created in
        the DataHub UI."""
        external = self._trusted_membership(actor, GroupMembershipClass)
        native = self._trusted_membership(actor, NativeGroupMembershipClass)
        return [*(external.groups if external else []), *(native.nativeGroups if native else [])]

    def _trusted_membership(self, actor: str, membership: type[AspectT]) -> AspectT | None:
        """A membership aspect unless the member wrote it themselves (then it proves nothing);
        one written by an admin, ingestion or Reflex counts."""
        aspect = self.catalog.get_aspect(actor, membership)
        if aspect is not None and self.catalog.aspect_writer(actor, membership) == actor:
            logger.warning(
                "%s wrote their own %s: it does not count for approval",
                actor,
                membership.ASPECT_NAME,
            )
            return None
        return aspect
