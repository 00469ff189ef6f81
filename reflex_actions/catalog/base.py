"""The narrow catalog interface Reflex needs; one adapter per store implements it.

Reads return plain models (``catalog.models``) or typed acryl-datahub aspects; writes take
``MetadataChangeProposalWrapper`` batches. Missing entities or aspects read as ``None`` or an
empty list, never as an exception.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    CorpUserStatusClass,
    GroupMembershipClass,
    IncidentInfoClass,
    OwnershipClass,
    _Aspect,
)

from reflex_actions.catalog.models import DatasetContext, IncidentContext, OwnerInfo
from reflex_actions.catalog.translate import incident_context
from reflex_actions.errors import ReflexError

if TYPE_CHECKING:
    from datahub.ingestion.graph.client import DataHubGraph

    from reflex_actions.config import ReflexConfig

AspectT = TypeVar("AspectT", bound=_Aspect)


class CatalogError(ReflexError):
    """The store cannot be reached, or holds a value Reflex cannot read."""


@dataclass(frozen=True)
class Written(Generic[AspectT]):
    """One stored value of an aspect and who wrote it, as the store recorded it: None when the
    store does not say (GMS keeps no writer for a timeseries value)."""

    aspect: AspectT
    writer: str | None


class Catalog(ABC):
    """Read the organizational graph; write lessons, assertions, coverage and incidents.

    A store is registered under the entry point group ``reflex_actions.catalogs``; the action
    opens the one its configuration names (:func:`reflex_actions.catalog.registry.open_store`).
    """

    @classmethod
    def open_for(cls, config: ReflexConfig, graph: DataHubGraph | None) -> Catalog:
        """The store for an action's configuration (``graph``: the pipeline's DataHub client);
        every store registered under ``reflex_actions.catalogs`` implements it."""
        raise CatalogError(f"{cls.__name__} cannot be opened from an action's configuration")

    def own_actors(self) -> list[str]:
        """Actors the store records for Reflex's own writes besides those it is told to record
        (a server records the authenticated principal). Fails when the store refuses Reflex."""
        return []

    def run_seal_key(self) -> bytes | None:
        """The key Reflex seals its run events with where the store keeps no writer for a
        timeseries value (a DataHub server); None where it keeps one."""
        return None

    def authenticates_callers(self) -> bool:
        """Whether the store authenticates whoever writes to it, so that the actor it records
        is the one who wrote. An embedded file has no callers to authenticate: its file
        permissions are the boundary, and the actor its writers name is believed."""
        return True

    # --- reads -------------------------------------------------------------------------------
    @abstractmethod
    def get_aspect(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        """The latest value of one aspect, or None when the entity or aspect is absent."""

    @abstractmethod
    def dataset(self, urn: str) -> DatasetContext | None:
        """Schema, domain, platform, owners, tags, terms, properties and one-hop lineage."""

    def incident(self, urn: str) -> IncidentContext | None:
        info = self.get_aspect(urn, IncidentInfoClass)
        return incident_context(urn, info) if info else None

    def user_status(self, urn: str) -> str | None:
        """``corpUserStatus.status`` (e.g. ACTIVE, SUSPENDED), or None when unknown."""
        status = self.get_aspect(urn, CorpUserStatusClass)
        return status.status if status else None

    @abstractmethod
    def aspect_writer(self, urn: str, aspect_class: type[AspectT]) -> str | None:
        """Who wrote the current value of an aspect, or None when it is absent or the store
        does not say (e.g. ingestion that records no actor)."""

    def owners_of(self, urn: str) -> list[OwnerInfo]:
        """The owners of any entity (a dataset, a domain), with their ownership types."""
        ownership = self.get_aspect(urn, OwnershipClass)
        return (
            [OwnerInfo(owner=o.owner, ownership_type=str(o.type)) for o in ownership.owners]
            if (ownership)
            else []
        )

    def groups_of(self, user: str) -> list[str]:
        """The groups a user belongs to (``groupMembership``, e.g. from an identity provider)."""
        membership = self.get_aspect(user, GroupMembershipClass)
        return list(membership.groups) if membership else []

    @abstractmethod
    def latest_timeseries(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        """The newest value of a timeseries aspect (e.g. an assertion's last run event)."""

    @abstractmethod
    def timeseries_written(
        self,
        urn: str,
        aspect_class: type[AspectT],
        *,
        limit: int,
        where: Mapping[str, str] | None = None,
    ) -> list[Written[AspectT]]:
        """The newest ``limit`` values of a timeseries aspect (newest first), each with its
        writer; with ``where``, only those whose fields equal the given values (e.g. an
        assertion's runs of one ``runId``)."""

    @abstractmethod
    def downstreams(self, urn: str) -> list[str]:
        """Datasets whose ``upstreamLineage`` names ``urn`` (answered by the store, not a scan)."""

    # --- candidate lookups (indexed / server-side) --------------------------------------------
    @abstractmethod
    def datasets_by_domain(self, domain_urn: str) -> list[str]: ...

    @abstractmethod
    def datasets_by_platform(self, platform: str) -> list[str]:
        """``platform`` is the platform name (``snowflake``) or its urn."""

    @abstractmethod
    def datasets_by_field(self, field_name: str) -> list[str]:
        """Datasets with a schema field of this name (case-insensitive, simple path)."""

    @abstractmethod
    def datasets_by_owner(self, owner_urn: str) -> list[str]: ...

    @abstractmethod
    def terms_under(self, node_urn: str) -> list[str]:
        """Glossary terms whose ``glossaryTermInfo.parentNode`` is ``node_urn`` (e.g. every
        lesson, for a scheduled evaluation of their controls)."""

    # --- writes --------------------------------------------------------------------------------
    @abstractmethod
    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        """Write a batch of aspects; an unchanged aspect is not rewritten."""

    @abstractmethod
    def set_structured_properties(
        self, urn: str, values: Mapping[str, Sequence[str | float]], actor: str
    ) -> None:
        """Set these structured properties on ``urn`` and keep its others, atomically (what the
        UI's upsertStructuredProperties does); a property given no values is removed (its
        removeStructuredProperties). ``actor`` is recorded where the store can."""

    @abstractmethod
    def add_owner(self, urn: str, owner: str, ownership_type: str, actor: str) -> None:
        """Add one owner to ``urn``, keeping the others (atomically, like a UI edit)."""

    @contextmanager
    def one_decision(self) -> Iterator[None]:
        """The writes made within as one, where the store can: the embedded store writes them
        in one transaction (all or none, one commit); a server takes each as it comes (each
        idempotent, so a decision cut short is finished by its redelivery)."""
        yield

    def close(self) -> None:  # noqa: B027 - adapters without resources need no cleanup
        """Release connections."""
