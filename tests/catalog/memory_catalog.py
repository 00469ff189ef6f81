"""An in-memory Catalog for unit-testing handler decisions without a store.

A test double, not a product store: it answers every method from plain dictionaries of typed
aspects, the way DataHub Lite answers them, and passes the same conformance suite. Each write
that changed something is kept in ``writes`` so a test can assert on exactly what a handler wrote
(``catalog.writes.clear()`` after seeding an estate leaves only the handler's own writes).
"""

from __future__ import annotations

import bisect
import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DomainsClass,
    GlossaryTermInfoClass,
    OwnerClass,
    OwnershipClass,
    SchemaMetadataClass,
    StructuredPropertiesClass,
    UpstreamLineageClass,
    _Aspect,
)
from datahub.utilities.urns.dataset_urn import DatasetUrn
from datahub.utilities.urns.error import InvalidUrnError

from reflex_actions.bounded import excerpt
from reflex_actions.catalog.base import AspectT, Catalog, CatalogError, Written
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.steward import ACTOR_PROPERTY, acting_as, merge_structured_properties
from reflex_actions.catalog.translate import DATASET_ASPECTS, dataset_context, simple_field_path

if TYPE_CHECKING:
    from datahub.ingestion.graph.client import DataHubGraph

    from reflex_actions.config import ReflexConfig

IndexedT = TypeVar("IndexedT", bound=_Aspect)

_DATASET_PREFIX = "urn:li:dataset:"


@dataclass(frozen=True)
class _Stored:
    """One stored aspect value and the acting user its write recorded (None when it named none)."""

    aspect: _Aspect
    writer: str | None


def _is_timeseries(aspect_class: type[_Aspect]) -> bool:
    return aspect_class.get_aspect_type() == "timeseries"


def _platform_of(urn: str) -> str | None:
    """The platform name of a dataset urn; None for a malformed one (it is simply not a dataset),
    as Lite's index skips it."""
    try:
        return DatasetUrn.from_string(urn).platform.split(":")[-1]
    except InvalidUrnError:
        return None


class MemoryCatalog(Catalog):
    """Catalog kept in memory: versioned aspects by (urn, aspect name), timeseries events by
    (urn, aspect name) ordered by ``timestampMillis``. Values are copied in and out, so a caller
    that mutates what it wrote or read cannot change what is stored."""

    @classmethod
    def open_for(cls, config: ReflexConfig, graph: DataHubGraph | None) -> MemoryCatalog:
        """A fresh, empty store: the double needs no configuration."""
        return cls()

    def __init__(self) -> None:
        self._versioned: dict[tuple[str, str], _Stored] = {}
        self._timeseries: dict[tuple[str, str], list[_Stored]] = {}
        #: Every write that changed something, in order (copies of the MCPs as emitted).
        self.writes: list[MetadataChangeProposalWrapper] = []

    # --- reads -------------------------------------------------------------------------------
    def _current(self, urn: str, aspect_class: type[_Aspect]) -> _Stored | None:
        key = (urn, aspect_class.ASPECT_NAME)
        if _is_timeseries(aspect_class):
            events = self._timeseries.get(key)
            return events[-1] if events else None
        return self._versioned.get(key)

    def get_aspect(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        # Like Lite, a timeseries aspect reads as its latest value.
        stored = self._current(urn, aspect_class)
        if stored is None or not isinstance(stored.aspect, aspect_class):
            return None
        return copy.deepcopy(stored.aspect)

    def aspect_writer(self, urn: str, aspect_class: type[AspectT]) -> str | None:
        stored = self._current(urn, aspect_class)
        return stored.writer if stored else None

    def latest_timeseries(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        return self.get_aspect(urn, aspect_class)

    def timeseries_written(
        self,
        urn: str,
        aspect_class: type[AspectT],
        *,
        limit: int,
        where: Mapping[str, str] | None = None,
    ) -> list[Written[AspectT]]:
        events = reversed(self._timeseries.get((urn, aspect_class.ASPECT_NAME), []))
        matching = [
            Written(copy.deepcopy(event.aspect), event.writer)
            for event in events
            if isinstance(event.aspect, aspect_class)
            and all(str(getattr(event.aspect, f, None)) == v for f, v in (where or {}).items())
        ]
        return matching[:limit]  # type: ignore[return-value]

    def dataset(self, urn: str) -> DatasetContext | None:
        if not urn.startswith(_DATASET_PREFIX):
            return None
        # No copies needed: dataset_context only reads the aspects into immutable models.
        aspects = {
            name: self._versioned[(urn, name)].aspect
            for name in DATASET_ASPECTS
            if (urn, name) in self._versioned
        }
        if not aspects:
            return None
        return dataset_context(urn, aspects, self.downstreams(urn))

    def _datasets_where(
        self,
        aspect_class: type[IndexedT],
        values_of: Callable[[IndexedT], Iterable[str]],
        value: str,
    ) -> list[str]:
        """Datasets whose stored ``aspect_class`` holds ``value`` (what Lite's index answers)."""
        return sorted(
            urn
            for (urn, name), stored in self._versioned.items()
            if name == aspect_class.ASPECT_NAME
            and urn.startswith(_DATASET_PREFIX)
            and isinstance(stored.aspect, aspect_class)
            and value in set(values_of(stored.aspect))
        )

    def downstreams(self, urn: str) -> list[str]:
        return self._datasets_where(
            UpstreamLineageClass, lambda lineage: (u.dataset for u in lineage.upstreams), urn
        )

    def datasets_by_domain(self, domain_urn: str) -> list[str]:
        return self._datasets_where(DomainsClass, lambda domains: domains.domains, domain_urn)

    def datasets_by_platform(self, platform: str) -> list[str]:
        # Any aspect, versioned or timeseries, makes a dataset known (as in Lite's index).
        urns = {urn for urn, _ in self._versioned} | {urn for urn, _ in self._timeseries}
        name = platform.split(":")[-1]
        return sorted(
            urn for urn in urns if urn.startswith(_DATASET_PREFIX) and _platform_of(urn) == name
        )

    def datasets_by_field(self, field_name: str) -> list[str]:
        return self._datasets_where(
            SchemaMetadataClass,
            lambda schema: (simple_field_path(f.fieldPath).lower() for f in schema.fields),
            field_name.lower(),
        )

    def datasets_by_owner(self, owner_urn: str) -> list[str]:
        return self._datasets_where(
            OwnershipClass, lambda ownership: (o.owner for o in ownership.owners), owner_urn
        )

    def terms_under(self, node_urn: str) -> list[str]:
        return sorted(
            urn
            for (urn, name), stored in self._versioned.items()
            if isinstance(stored.aspect, GlossaryTermInfoClass)
            and stored.aspect.parentNode == node_urn
        )

    # --- writes --------------------------------------------------------------------------------
    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        # Check the whole batch first: a bad proposal leaves the store as it was.
        for mcp in mcps:
            if mcp.aspect is None or mcp.entityUrn is None:
                raise CatalogError(
                    f"cannot write {excerpt(mcp.aspectName)} on {excerpt(mcp.entityUrn)}: "
                    "the memory catalog stores whole aspects (an entity urn and an aspect value)"
                )
        for mcp in mcps:
            if self._store(mcp):
                self.writes.append(copy.deepcopy(mcp))

    def _store(self, mcp: MetadataChangeProposalWrapper) -> bool:
        """Store one proposal's aspect; False when it equals what is stored (nothing changed,
        and like Lite the recorded writer stays that of the earlier write)."""
        aspect = mcp.aspect
        assert aspect is not None and mcp.entityUrn is not None  # checked by emit
        properties = (mcp.systemMetadata.properties if mcp.systemMetadata else None) or {}
        stored = _Stored(copy.deepcopy(aspect), properties.get(ACTOR_PROPERTY))
        key = (mcp.entityUrn, aspect.get_aspect_name())
        if _is_timeseries(type(aspect)):
            events = self._timeseries.setdefault(key, [])
            if any(event.aspect == aspect for event in events):
                return False  # a redelivered event
            # After any earlier event with the same timestamp: the later write wins the tie.
            bisect.insort(events, stored, key=lambda event: event.aspect.timestampMillis)
            return True
        previous = self._versioned.get(key)
        if previous is not None and previous.aspect == aspect:
            return False
        self._versioned[key] = stored
        return True

    def set_structured_properties(
        self, urn: str, values: Mapping[str, Sequence[str | float]], actor: str
    ) -> None:
        current = self.get_aspect(urn, StructuredPropertiesClass)
        self.emit([acting_as(actor, urn, merge_structured_properties(current, values, actor))])

    def add_owner(self, urn: str, owner: str, ownership_type: str, actor: str) -> None:
        current = self.get_aspect(urn, OwnershipClass) or OwnershipClass(owners=[])
        if any(o.owner == owner and o.type == ownership_type for o in current.owners):
            return
        current.owners.append(OwnerClass(owner=owner, type=ownership_type))
        current.lastModified = AuditStampClass(time=int(time.time() * 1000), actor=actor)
        self.emit([acting_as(actor, urn, current)])
