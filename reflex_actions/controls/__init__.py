"""The control library: typed specs, strict YAML parsing, a registry of control types.

Adding a control type means adding one module here that defines a :class:`Control` subclass
decorated with :func:`register_control`; it is discovered on import of this package.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reflex_actions.controls.base import CONTROL_TYPES, Control, register_control
from reflex_actions.errors import ControlSpecError

__all__ = [
    "CONTROL_TYPES",
    "Control",
    "dump_control_yaml",
    "load_control_spec",
    "parse_control_spec",
    "parse_control_yaml",
    "register_control",
]

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")


class _StrictLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects duplicate keys instead of silently keeping the last."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise ControlSpecError(f"duplicate key {key!r} at line {key_node.start_mark.line + 1}")
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _format_validation_error(type_name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "spec"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown key {location!r}")
        else:
            problems.append(f"{location}: {item['msg']}")
    return f"invalid {type_name!r} control: " + "; ".join(problems)


def parse_control_spec(data: Any) -> Control:
    """Validate a control spec given as a mapping; raise ControlSpecError naming the problem."""
    if not isinstance(data, dict):
        raise ControlSpecError(
            f"a control spec must be a mapping with a 'type' key, got {type(data).__name__}"
        )
    type_name = data.get("type")
    if type_name is None:
        raise ControlSpecError(
            f"control spec has no 'type'; known types: {', '.join(sorted(CONTROL_TYPES))}"
        )
    control_cls = CONTROL_TYPES.get(type_name) if isinstance(type_name, str) else None
    if control_cls is None:
        raise ControlSpecError(
            f"unknown control type {type_name!r}; known types: {', '.join(sorted(CONTROL_TYPES))}"
        )
    try:
        return control_cls.model_validate(data)
    except ValidationError as error:
        raise ControlSpecError(_format_validation_error(type_name, error)) from None


def parse_control_yaml(text: str) -> Control:
    """Parse a control spec from YAML text, strictly."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as error:
        raise ControlSpecError(f"control spec is not valid YAML: {error}") from None
    return parse_control_spec(data)


def load_control_spec(path: str | Path) -> Control:
    """Read and parse a control spec file."""
    spec_path = Path(path)
    try:
        text = spec_path.read_text(encoding="utf-8")
    except OSError as error:
        raise ControlSpecError(f"cannot read control spec {spec_path}: {error.strerror}") from None
    try:
        return parse_control_yaml(text)
    except ControlSpecError as error:
        raise ControlSpecError(f"{spec_path}: {error}") from None


def dump_control_yaml(control: Control) -> str:
    """The canonical YAML text of a control spec (defaults omitted, keys in model order)."""
    data = control.model_dump(mode="json", exclude_defaults=True)
    return yaml.safe_dump({"type": control.type, **data}, sort_keys=False)
