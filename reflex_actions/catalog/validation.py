"""What DataHub checks before it writes a structured property value, checked before Reflex does.

GMS's ``StructuredPropertiesValidator`` refuses an assignment in a structuredProperties aspect
that names no defined property, holds more than one value where the cardinality is SINGLE, holds
a value not of the definition's type (string, rich text, date and urn are stored as strings,
numbers as doubles) or outside its allowed values, or an urn of an entity type its
``allowedTypes`` do not allow: :func:`structured_property_errors` is that check, on the aspect's
JSON (the fake GMS of the tests applies it too). :func:`steward_assignment` applies it to a
steward's edit on the embedded store, which has no GMS to refuse it, with what DataHub's UI
checks besides: the entity is an urn of a type the property applies to.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable, Sequence
from typing import Any

from datahub.metadata.schema_classes import StructuredPropertyDefinitionClass
from datahub.utilities.urns.error import InvalidUrnError
from datahub.utilities.urns.urn import Urn, guess_entity_type

from reflex_actions.bounded import excerpt
from reflex_actions.errors import ReflexError
from reflex_actions.vocabulary import display_name, property_urn

_STORED_AS_STRING = {"string", "rich_text", "date", "urn"}
_SHOWN = 200  # characters of a value a message repeats


class PropertyValueError(ReflexError):
    """A structured property value DataHub would refuse to write; the message says why."""


def _shown(value: object) -> str:
    """A value as a message shows it: a property value's string or number, bounded."""
    if isinstance(value, dict) and len(value) == 1:
        (value,) = value.values()
    text = repr(value) if isinstance(value, str) else str(value)
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
                names = ", ".join(_type_id(t) for t in allowed)
                return f"{shown} is not of an allowed entity type ({_shown(names)})"
    elif kind == "number" and not isinstance(value.get("double"), int | float):
        return f"{shown} should be a number"
    return None


def structured_property_errors(
    aspect: dict[str, Any], definition_of: Callable[[str], dict[str, Any] | None]
) -> list[str]:
    """Why GMS would refuse to write ``aspect`` (empty when it would accept it), each
    property's definition (its JSON) given by ``definition_of``."""
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
                + ", ".join(_shown(value) for value in values)
            )
        allowed = [a.get("value") for a in definition.get("allowedValues") or []]
        for value in values:
            if (error := _type_error(prop, definition, value)) is not None:
                errors.append(error)
            if allowed and value not in allowed:
                errors.append(
                    f"Property: {prop}, value: {_shown(value)} should be one of "
                    + ", ".join(_shown(a) for a in allowed)
                )
    return errors


@functools.cache
def reflex_definitions() -> dict[str, dict[str, Any]]:
    """Reflex's structured property definitions (what ``init`` writes), by property urn, as
    JSON."""
    from reflex_actions.catalog.bootstrap import bootstrap_mcps

    return {
        str(mcp.entityUrn): mcp.aspect.to_obj()
        for mcp in bootstrap_mcps()
        if isinstance(mcp.aspect, StructuredPropertyDefinitionClass)
    }


def _typed(definition: dict[str, Any], value: str) -> str | float:
    """A value given as text, as the definition's type stores it: a number, else the text."""
    if _type_id(definition.get("valueType", "")).lower() != "number":
        return value
    try:
        return float(value)
    except ValueError:
        return value  # left as text, for the check to refuse as no number


def steward_assignment(
    entity_urn: str, property_name: str, values: Sequence[str]
) -> tuple[str, str, list[str | float]]:
    """(the entity's type, the property's urn, the values as stored) of a steward setting one
    of Reflex's structured properties (``reflex.approval``, or its urn) to ``values`` (as typed
    on a command line) on ``entity_urn``; PropertyValueError naming the first thing DataHub
    would refuse. Whether the entity exists is the store's to say."""
    try:
        entity_type = Urn.from_string(entity_urn).entity_type
    except InvalidUrnError:
        raise PropertyValueError(f"not an urn: {excerpt(entity_urn)}") from None
    urn = property_name if property_name.startswith("urn:li:") else property_urn(property_name)
    definitions = reflex_definitions()
    definition = definitions.get(urn)
    if definition is None:
        known = ", ".join(sorted(display_name(name) for name in definitions))
        raise PropertyValueError(
            f"no Reflex structured property {excerpt(property_name)}; one of {known}"
        )
    applies_to = [_type_id(t) for t in definition.get("entityTypes") or []]
    if entity_type not in applies_to:
        raise PropertyValueError(
            f"{display_name(urn)} applies to {' and '.join(applies_to)} entities, not to "
            f"{excerpt(entity_type)}"
        )
    typed = [_typed(definition, value) for value in values]
    stored = [{"double": v} if isinstance(v, float) else {"string": v} for v in typed]
    errors = structured_property_errors(
        {"properties": [{"propertyUrn": urn, "values": stored}]}, definitions.get
    )
    if errors:
        raise PropertyValueError(errors[0])
    return entity_type, urn, typed
