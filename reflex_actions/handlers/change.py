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
    time_ms: int

    @classmethod
    def from_mcl(cls, event: MetadataChangeLogClass) -> AspectChange:
        urn = event.entityUrn or ""
        if not urn or not event.aspectName:
            raise MalformedEvent(f"MCL without entityUrn or aspectName ({event.entityType})")
        return cls(
            entity_type=event.entityType,
            urn=urn,
            aspect_name=event.aspectName,
            aspect=_json(event.aspect, event.aspectName, urn),
            previous=_json(event.previousAspectValue, f"previous {event.aspectName}", urn),
            actor=event.created.actor if event.created else None,
            time_ms=event.created.time if event.created else 0,
        )

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
