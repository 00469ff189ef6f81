"""What a steward does in the DataHub UI, as the aspects the UI's mutations write.

Used by the steward commands on the embedded store (there is no UI there) and by the demo. The
acting user is stamped where DataHub keeps it (the aspect's audit stamps) and, for the embedded
change feed, in ``systemMetadata.properties["actor"]``, which it reports as ``created.actor``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

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

from reflex_actions.bounded import excerpt
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


def resolved_incident(
    catalog: Catalog, incident_urn: str, note: str, actor: str
) -> MetadataChangeProposalWrapper:
    """``updateIncidentStatus(state: RESOLVED, message)`` as the aspect it writes: only the
    status changes."""
    info = catalog.get_aspect(incident_urn, IncidentInfoClass)
    if info is None:
        raise CatalogError(f"no incident {excerpt(incident_urn)} in the store")
    info.status = IncidentStatusClass(
        state=IncidentStateClass.RESOLVED,
        stage=info.status.stage,
        message=note,
        lastUpdated=_stamp(actor),
    )
    return acting_as(actor, incident_urn, info)


def resolve_incident(catalog: Catalog, incident_urn: str, note: str, actor: str) -> None:
    """What a steward resolving an incident in the UI writes."""
    catalog.emit([resolved_incident(catalog, incident_urn, note, actor)])


def merge_structured_properties(
    current: StructuredPropertiesClass | None,
    values: Mapping[str, Sequence[str | float]],
    actor: str,
) -> StructuredPropertiesClass:
    """``current`` with ``values`` replacing those properties' assignments, audit-stamped; a
    property given no values is removed."""
    existing = {p.propertyUrn: p for p in (current.properties if current else [])}
    stamp = _stamp(actor)
    for property_urn, property_values in values.items():
        if not property_values:
            existing.pop(property_urn, None)
            continue
        previous = existing.get(property_urn)
        if previous is not None and list(previous.values) == list(property_values):
            continue  # unchanged: keep its stamps, so an unchanged aspect is not rewritten
        existing[property_urn] = StructuredPropertyValueAssignmentClass(
            propertyUrn=property_urn,
            values=list(property_values),
            created=previous.created if previous and previous.created else stamp,
            lastModified=stamp,
        )
    return StructuredPropertiesClass(properties=list(existing.values()))
