"""The control library: typed specs, strict YAML parsing, a registry of control types.

Adding a control type means adding one module here that defines a :class:`Control` subclass
decorated with :func:`register_control`; it is discovered on import of this package.

Specs come from stewards and models (the ``reflex.controlSpec`` property, drafts), so parsing is
bounded: a spec is at most :data:`MAX_SPEC_CHARS` long, nests at most :data:`MAX_DEPTH` levels,
holds no YAML anchors or aliases (a few hundred bytes of aliases expand to gigabytes), and every
error is one short line.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reflex_actions.bounded import excerpt, shorten
from reflex_actions.controls.base import CONTROL_TYPES, Control, register_control
from reflex_actions.errors import ControlSpecError

__all__ = [
    "CONTROL_TYPES",
    "MAX_DEPTH",
    "MAX_SPEC_CHARS",
    "Control",
    "dump_control_line",
    "dump_control_yaml",
    "load_control_spec",
    "parse_control_spec",
    "parse_control_yaml",
    "register_control",
]

#: Longest control spec accepted (characters); real specs are a few hundred.
MAX_SPEC_CHARS = 16 * 1024
#: Deepest nesting of collections in a spec; real specs nest two levels.
MAX_DEPTH = 16
#: Most digits in one YAML integer: Python refuses to parse more than 4300, and the fields
#: name their own, far lower, bounds.
MAX_INT_DIGITS = 1000
#: Most validation problems listed in one message.
MAX_PROBLEMS = 5

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")


def _line(mark: yaml.Mark | None) -> str:
    return f" (line {mark.line + 1})" if mark else ""


class _StrictLoader(yaml.SafeLoader):
    """A safe YAML loader that also refuses what a control spec never needs: duplicate keys,
    anchors and aliases, deep nesting and huge integers."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        event = self.peek_event()
        if getattr(event, "anchor", None) is not None:
            raise ControlSpecError(
                f"control spec uses a YAML anchor or alias{_line(event.start_mark)}; "
                "write each value out instead"
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ControlSpecError(
                    f"control spec nests deeper than {MAX_DEPTH} levels{_line(event.start_mark)}"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, Hashable):
            raise ControlSpecError(
                f"a mapping key must be a plain value{_line(key_node.start_mark)}"
            )
        if key in seen:
            raise ControlSpecError(f"duplicate key {excerpt(key)}{_line(key_node.start_mark)}")
        seen.add(key)
    return loader.construct_mapping(node)


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INT_DIGITS:
        raise ControlSpecError(
            f"a number of {len(node.value)} digits{_line(node.start_mark)}; "
            f"at most {MAX_INT_DIGITS} digits are allowed"
        )
    return loader.construct_yaml_int(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _format_validation_error(type_name: str, error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        location = ".".join(str(part) for part in item["loc"]) or "spec"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown key {excerpt(location)}")
        else:
            problems.append(f"{shorten(location)}: {shorten(item['msg'], 200)}")
    if len(problems) > MAX_PROBLEMS:
        problems[MAX_PROBLEMS:] = [f"and {len(problems) - MAX_PROBLEMS} more problem(s)"]
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
            f"unknown control type {excerpt(type_name)}; "
            f"known types: {', '.join(sorted(CONTROL_TYPES))}"
        )
    try:
        return control_cls.model_validate(data)
    except ValidationError as error:
        raise ControlSpecError(_format_validation_error(type_name, error)) from None


def parse_control_yaml(text: str) -> Control:
    """Parse a control spec from YAML text (block, flow or JSON), strictly and boundedly."""
    if len(text) > MAX_SPEC_CHARS:
        raise ControlSpecError(
            f"control spec is {len(text)} characters long; at most {MAX_SPEC_CHARS} are allowed"
        )
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        problem = error.problem or error.context or "unreadable"
        raise ControlSpecError(
            f"control spec is not valid YAML{_line(error.problem_mark)}: {shorten(problem, 200)}"
        ) from None
    except yaml.YAMLError as error:  # e.g. a character YAML does not accept
        raise ControlSpecError(
            f"control spec is not valid YAML: {shorten(str(error), 200)}"
        ) from None
    return parse_control_spec(data)


def load_control_spec(path: str | Path) -> Control:
    """Read and parse a control spec file (reading no more than a spec may hold)."""
    spec_path = Path(path)
    try:
        with spec_path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_SPEC_CHARS + 1)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise ControlSpecError(f"cannot read control spec {spec_path}: {reason}") from None
    try:
        return parse_control_yaml(text)
    except ControlSpecError as error:
        raise ControlSpecError(f"{spec_path}: {error}") from None


def _spec_data(control: Control) -> dict[str, Any]:
    data = control.model_dump(mode="json", exclude_defaults=True)
    return {"type": control.type, **data}


def dump_control_yaml(control: Control) -> str:
    """The canonical YAML text of a control spec (defaults omitted, keys in model order)."""
    return yaml.safe_dump(_spec_data(control), sort_keys=False)


class _OneLineDumper(yaml.SafeDumper):
    """Flow YAML that never breaks a line: text that would need a line break (or holds a
    character an input field could drop) is double-quoted with escapes."""


def _represent_text(dumper: _OneLineDumper, value: str) -> yaml.ScalarNode:
    style = None if value.isprintable() else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_OneLineDumper.add_representer(str, _represent_text)


def dump_control_line(control: Control) -> str:
    """The spec as one line of flow YAML, e.g. ``{type: uniqueness, field: transaction_id}``.

    This is the form stored in ``reflex.controlSpec``: DataHub's UI edits a single-valued string
    in a one-line input that strips newlines, and this form has none to lose.
    """
    text = yaml.dump(
        _spec_data(control),
        Dumper=_OneLineDumper,
        default_flow_style=True,
        sort_keys=False,
        allow_unicode=True,
        width=float("inf"),
    )
    return text.strip()
