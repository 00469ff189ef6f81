"""What a steward does in the DataHub UI, as the aspects the UI's mutations write.

Used by the steward commands on the embedded store (there is no UI there) and by the demo. The
acting user is stamped where DataHub keeps it (the aspect's audit stamps) and, for the embedded
change feed, in ``systemMetadata.properties["actor"]``, which it reports as ``created.actor``.
"""

from __future__ import annotations

import time

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AuditStampClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    SystemMetadataClass,
    _Aspect,
)

from reflex_actions.catalog.base import Catalog, CatalogError

#: systemMetadata property naming the user who made an embedded write.
ACTOR_PROPERTY = "actor"


def acting_as(actor: str, urn: str, aspect: _Aspect) -> MetadataChangeProposalWrapper:
    """An MCP recording ``actor`` as the user who wrote it."""
    return MetadataChangeProposalWrapper(
        entityUrn=urn,
        aspect=aspect,
        systemMetadata=SystemMetadataClass(properties={ACTOR_PROPERTY: actor}),
    )


def _stamp(actor: str) -> AuditStampClass:
    return AuditStampClass(time=int(time.time() * 1000), actor=actor)


def resolve_incident(catalog: Catalog, incident_urn: str, note: str, actor: str) -> None:
    """``updateIncidentStatus(state: RESOLVED, message)``: only the status changes."""
    info = catalog.get_aspect(incident_urn, IncidentInfoClass)
    if info is None:
        raise CatalogError(f"no incident {incident_urn}")
    info.status = IncidentStatusClass(
        state=IncidentStateClass.RESOLVED,
        stage=info.status.stage,
        message=note,
        lastUpdated=_stamp(actor),
    )
    catalog.emit([acting_as(actor, incident_urn, info)])


def set_structured_property(
    catalog: Catalog, urn: str, property_urn: str, values: list[str | float], actor: str
) -> None:
    """``upsertStructuredProperties``: replace one property's values, keep the others."""
    current = catalog.get_aspect(urn, StructuredPropertiesClass)
    others = [p for p in (current.properties if current else []) if p.propertyUrn != property_urn]
    previous = next(
        (p for p in (current.properties if current else []) if p.propertyUrn == property_urn), None
    )
    stamp = _stamp(actor)
    assignment = StructuredPropertyValueAssignmentClass(
        propertyUrn=property_urn,
        values=list(values),
        created=previous.created if previous and previous.created else stamp,
        lastModified=stamp,
    )
    catalog.emit(
        [acting_as(actor, urn, StructuredPropertiesClass(properties=[*others, assignment]))]
    )
