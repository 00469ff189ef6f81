"""What GMS's ``StructuredPropertiesValidator`` rejects, for the FAKE GMS.

Every assignment in a structuredProperties aspect about to be written must name a defined
property, hold one value when its cardinality is SINGLE, hold values of the definition's type
(string, rich text, date and urn are stored as strings, numbers as doubles), keep to its allowed
values, and, for urn values, name an entity type the definition's ``allowedTypes`` allow.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from datahub.utilities.urns.urn import guess_entity_type

_STORED_AS_STRING = {"string", "rich_text", "date", "urn"}
_SHOWN = 200  # characters of a value a message repeats


def _shown(value: object) -> str:
    text = str(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _type_id(type_urn: str) -> str:
    """``urn:li:dataType:datahub.string`` -> ``string``; ``urn:li:entityType:datahub.dataset``
    -> ``dataset`` (GMS's StructuredPropertyUtils.getValueTypeId)."""
    return type_urn.rsplit(":", 1)[-1].removeprefix("datahub.")


def _entity_type(urn: str) -> str | None:
    return guess_entity_type(urn) if urn.startswith("urn:li:") and urn.count(":") >= 3 else None


def _type_error(prop: str, definition: dict[str, Any], value: dict[str, Any]) -> str | None:
    kind = _type_id(definition.get("valueType", "")).lower()
    shown = f"Property: {prop}, value: {_shown(value)}"
    if kind in _STORED_AS_STRING:
        text = value.get("string")
        if not isinstance(text, str):
            return f"{shown} should be a string"
        if kind == "date":
            try:
                datetime.date.fromisoformat(text)
            except ValueError:
                return f"{shown} should be a date with format YYYY-MM-DD"
        if kind == "urn":
            entity_type = _entity_type(text)
            if entity_type is None:
                return f"{shown} should be an urn"
            allowed = (definition.get("typeQualifier") or {}).get("allowedTypes")
            if allowed and entity_type.lower() not in {_type_id(t).lower() for t in allowed}:
                return f"{shown} is not of an allowed entity type {_shown(allowed)}"
    elif kind == "number" and not isinstance(value.get("double"), int | float):
        return f"{shown} should be a number"
    return None


def structured_property_errors(
    aspect: dict[str, Any], definition_of: Callable[[str], dict[str, Any] | None]
) -> list[str]:
    """Why GMS would refuse to write ``aspect`` (empty when it would accept it)."""
    errors: list[str] = []
    seen: set[tuple[str, str]] = set()
    for assignment in aspect.get("properties") or []:
        prop = assignment.get("propertyUrn", "")
        source = (assignment.get("attribution") or {}).get("source", "")
        if (prop, source) in seen:
            errors.append(f"Property: {_shown(prop)} has multiple entries")
        seen.add((prop, source))
        if _entity_type(prop) != "structuredProperty":
            errors.append(
                f"Unexpected entity type. Expected: structuredProperty Found: {_shown(prop)}"
            )
            continue
        definition = definition_of(prop)
        if definition is None:
            errors.append(f"Unexpected null value found for {prop} Structured Property Definition.")
            continue
        values = assignment.get("values") or []
        if definition.get("cardinality") == "SINGLE" and len(values) > 1:
            errors.append(
                f"Property: {prop} has cardinality 1, but multiple values were assigned: "
                + _shown(values)
            )
        allowed = [a.get("value") for a in definition.get("allowedValues") or []]
        for value in values:
            if (error := _type_error(prop, definition, value)) is not None:
                errors.append(error)
            if allowed and value not in allowed:
                errors.append(
                    f"Property: {prop}, value: {_shown(value)} should be one of {_shown(allowed)}"
                )
    return errors
