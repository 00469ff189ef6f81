"""One MetadataChangeLog event, read as the change of one aspect: before, after, who."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from datahub.emitter.serialization_helper import post_json_transform
from datahub.metadata.schema_classes import (
    GenericAspectClass,
    MetadataChangeLogClass,
    StructuredPropertiesClass,
    _Aspect,
)

from reflex_actions.errors import ReflexError
from reflex_actions.lessons.model import EventStamp, LogPosition
from reflex_actions.times import believed_time

AspectT = TypeVar("AspectT", bound=_Aspect)


class MalformedEvent(ReflexError):
    """An event Reflex cannot read; it is logged and skipped."""


def _json(aspect: GenericAspectClass | None, what: str, urn: str) -> dict[str, Any] | None:
    if aspect is None:
        return None
    try:
        value = json.loads(aspect.value)
    except (TypeError, ValueError) as error:
        raise MalformedEvent(f"{what} of {urn} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise MalformedEvent(f"{what} of {urn} is not a JSON object")
    return value


@dataclass(frozen=True)
class AspectChange:
    entity_type: str
    urn: str
    aspect_name: str
    aspect: dict[str, Any] | None
    previous: dict[str, Any] | None
    #: who made the change (``created.actor``)
    actor: str | None
    #: when, as Reflex believes it (``created.time``, unless it is ahead of Reflex's clock)
    time_ms: int
    #: where the event is in the log Reflex reads (None: a source that does not say)
    position: LogPosition | None = None
    #: whether DataHub authenticated ``actor`` (not with metadata-service auth off)
    authenticated: bool = True
    #: ``created.time`` as recorded, even ahead of Reflex's clock: what names the fact (a run
    #: id), the same on every delivery; None when it is ``time_ms``
    recorded_ms: int | None = None

    @classmethod
    def from_mcl(
        cls,
        event: MetadataChangeLogClass,
        *,
        now_ms: int,
        position: LogPosition | None = None,
        authenticated: bool = True,
    ) -> AspectChange:
        urn = event.entityUrn or ""
        if not urn or not event.aspectName:
            raise MalformedEvent(f"MCL without entityUrn or aspectName ({event.entityType})")
        stamped = event.created.time if event.created else 0
        return cls(
            entity_type=event.entityType,
            urn=urn,
            aspect_name=event.aspectName,
            aspect=_json(event.aspect, event.aspectName, urn),
            previous=_json(event.previousAspectValue, f"previous {event.aspectName}", urn),
            actor=event.created.actor if event.created else None,
            time_ms=believed_time(stamped, now_ms, f"{event.aspectName} of {urn}"),
            position=position,
            authenticated=authenticated,
            recorded_ms=stamped,
        )

    @property
    def recorded_time(self) -> int:
        """The time the writer or DataHub recorded (see ``recorded_ms``)."""
        return self.time_ms if self.recorded_ms is None else self.recorded_ms

    @property
    def stamp(self) -> EventStamp:
        """Who, when and where in the log: what a decision on the lesson records."""
        return EventStamp(
            actor=self.actor,
            at=self.time_ms,
            position=self.position,
            authenticated=self.authenticated,
        )

    def before(self, position: LogPosition | None) -> bool:
        """Whether this event came before ``position`` in the log (see LogPosition.before)."""
        return self.position is not None and self.position.before(position)

    def typed(self, aspect_class: type[AspectT], previous: bool = False) -> AspectT | None:
        """The new (or previous) value as an aspect class; MalformedEvent when it does not fit."""
        value = self.previous if previous else self.aspect
        if value is None:
            return None
        try:
            return aspect_class.from_obj(post_json_transform(value))
        except Exception as error:
            raise MalformedEvent(
                f"{self.aspect_name} of {self.urn} is malformed: {error}"
            ) from None

    def property_values(self, property_urn: str, previous: bool = False) -> list[str | float]:
        """A structured property's values before or after the change."""
        properties = self.typed(StructuredPropertiesClass, previous=previous)
        for assignment in properties.properties if properties else []:
            if assignment.propertyUrn == property_urn:
                return list(assignment.values)
        return []

    def property_became(self, property_urn: str, value: str) -> bool:
        """Whether a single-valued structured property changed to ``value`` in this event."""
        return self.property_values(property_urn) == [value] and self.property_values(
            property_urn, previous=True
        ) != [value]


def position_in(meta: dict[str, Any]) -> LogPosition | None:
    """The event's place in the log, from what its source says of it: the kafka source's
    topic, partition and offset, or the embedded change feed's row id."""
    kafka, lite = meta.get("kafka"), meta.get("lite")
    try:
        if isinstance(kafka, dict):
            stream = f"kafka:{kafka['topic']}:{int(kafka['partition'])}"
            return LogPosition(stream=stream, offset=int(kafka["offset"]))
        if isinstance(lite, dict):
            return LogPosition(stream="lite", offset=int(lite["rowid"]))
    except (KeyError, TypeError, ValueError):
        pass
    return None
