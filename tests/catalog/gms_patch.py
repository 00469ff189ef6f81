"""How GMS applies a PATCH proposal, for the FAKE GMS: JSON patch over arrays keyed by fields.

GMS (entity-registry ``CompoundKeyTemplate`` / ``ArrayMergingTemplate``) turns each keyed array
into nested maps (one level per key field, a missing key reading as ""), creates the objects a
patch path passes through, applies the RFC 6902 operations to that document and turns the maps
back into arrays, putting a key that only lived in the path back into its element. A
``GenericJsonPatch`` body (``{"arrayPrimaryKeys": ..., "patch": [...]}``, what the SDK's patch
builders send) names its own keys; a bare operation list uses the aspect's template keys.
"""

from __future__ import annotations

import copy
from typing import Any

#: Separates the parts of a nested key field (``attribution␟source``), as in GMS.
UNIT_SEPARATOR = "\u241f"

#: The keyed arrays of the templates GMS ships, for the aspects Reflex patches.
TEMPLATE_KEYS: dict[str, dict[str, list[str]]] = {
    "structuredProperties": {"properties": ["propertyUrn", f"attribution{UNIT_SEPARATOR}source"]},
    "ownership": {"owners": ["owner", "type", "typeUrn"]},
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "structuredProperties": {"properties": []},
    "ownership": {"owners": []},
}


class PatchError(ValueError):
    """A patch GMS would refuse to apply (bad operation or path)."""


def _key_of(element: dict[str, Any], key_field: str) -> str:
    value: Any = element
    for part in key_field.split(UNIT_SEPARATOR):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _array_to_map(document: dict[str, Any], field: str, keys: list[str]) -> None:
    nested: dict[str, Any] = {}
    for element in document.get(field) or []:
        level = nested
        for key_field in keys[:-1]:
            level = level.setdefault(_key_of(element, key_field), {})
        level[_key_of(element, keys[-1])] = copy.deepcopy(element)
    document[field] = nested


def _merge_to_array(node: Any, keys: list[str]) -> list[Any]:
    if not keys:
        return list(node) if isinstance(node, list) else [node]
    if not isinstance(node, dict):
        return [item for value in node for item in _merge_to_array(value, keys[1:])]
    merged = []
    for key, value in node.items():
        elements = _merge_to_array(value, keys[1:])
        if key and UNIT_SEPARATOR not in keys[0]:  # a key that only lived in the path
            for element in elements:
                if isinstance(element, dict):
                    element.setdefault(keys[0], key)
        merged += elements
    return merged


def _tokens(path: str) -> list[str]:
    if not isinstance(path, str) or not path.startswith("/"):
        raise PatchError(f"patch path must start with '/': {str(path)[:200]!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _populate_parents(document: dict[str, Any], op: str, tokens: list[str]) -> None:
    """GMS creates each object a path passes through (and, for remove, the target itself)."""
    parent: Any = document
    for token in tokens if op == "remove" else tokens[:-1]:
        if not isinstance(parent, dict):
            return
        parent = parent.setdefault(token, {})


def _apply(document: dict[str, Any], operation: dict[str, Any]) -> None:
    op = operation.get("op")
    if op not in ("add", "remove", "replace"):
        raise PatchError(f"Unsupported PATCH operation: `{str(op)[:50]}`")
    tokens = _tokens(operation.get("path", ""))
    _populate_parents(document, op, tokens)
    parent: Any = document
    for token in tokens[:-1]:
        parent = parent[int(token)] if isinstance(parent, list) else parent.get(token)
        if parent is None:
            raise PatchError(f"patch path {operation['path'][:200]!r} does not exist")
    last = tokens[-1]
    value = copy.deepcopy(operation.get("value"))
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op == "add":
            parent.insert(index, value)
        elif op == "remove":
            del parent[index]
        else:
            parent[index] = value
    elif op == "add":
        parent[last] = value
    elif last not in parent:
        raise PatchError(f"patch path {operation['path'][:200]!r} does not exist")
    elif op == "remove":
        del parent[last]
    else:
        parent[last] = value


def apply_patch(aspect_name: str, current: dict[str, Any] | None, body: Any) -> dict[str, Any]:
    """The aspect after applying a PATCH proposal's ``body`` to its ``current`` value."""
    if isinstance(body, list):
        operations, array_keys = body, TEMPLATE_KEYS.get(aspect_name)
        if array_keys is None:
            raise PatchError(f"the fake GMS has no patch template for {aspect_name}")
    elif isinstance(body, dict) and isinstance(body.get("patch"), list):
        operations, array_keys = body["patch"], body.get("arrayPrimaryKeys") or {}
    else:
        raise PatchError("a patch is a list of operations or an object with a `patch` list")
    base = current if current is not None else _DEFAULTS.get(aspect_name, {})
    document = copy.deepcopy(base)
    for field, keys in array_keys.items():
        _array_to_map(document, field, keys)
    try:
        for operation in operations:
            _apply(document, operation)
    except (IndexError, ValueError, TypeError, AttributeError) as error:
        raise PatchError(f"cannot apply the patch to {aspect_name}: {error}") from None
    for field, keys in array_keys.items():
        node = document.get(field)
        if not isinstance(node, list):
            document[field] = [] if node is None else _merge_to_array(node, keys)
    return document
