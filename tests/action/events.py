"""The change-log events the action tests hand to ``act()``, as DataHub's Kafka source delivers
them (an envelope with the message's place in the log)."""

from __future__ import annotations

import json

from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeLogClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)

from reflex_actions.times import now_ms


def _properties(values: dict[str, list[str]]) -> GenericAspectClass:
    properties = [
        {"propertyUrn": p, "values": [{"string": v} for v in vs]} for p, vs in values.items()
    ]
    return GenericAspectClass(
        value=json.dumps({"properties": properties}).encode(), contentType="application/json"
    )


def lesson_properties_event(
    urn: str,
    actor: str,
    before: dict[str, list[str]],
    after: dict[str, list[str]],
    offset: int,
) -> EventEnvelope:
    """``actor`` edits the term's structured properties from ``before`` to ``before`` updated
    with ``after``; the message is at ``offset`` of the versioned change log."""
    mcl = MetadataChangeLogClass(
        entityType="glossaryTerm",
        entityUrn=urn,
        changeType=ChangeTypeClass.UPSERT,
        aspectName="structuredProperties",
        aspect=_properties({**before, **after}),
        previousAspectValue=_properties(before),
        created=AuditStampClass(time=now_ms(), actor=actor),
    )
    meta = {"kafka": {"topic": "MetadataChangeLog_Versioned_v1", "partition": 0, "offset": offset}}
    return EventEnvelope(
        METADATA_CHANGE_LOG_EVENT_V1_TYPE, MetadataChangeLogEvent.from_class(mcl), meta
    )
