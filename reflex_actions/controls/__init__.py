"""The control library: typed specs, strict YAML parsing, a registry of control types.

A control type is a :class:`Control` subclass that a lesson kind names in its ``controls``;
the known types are those of the registered kinds (``reflex_actions.kinds``). Parsing a spec
loads only its type's class when its package declares where that is (``reflex_actions.controls``).

Specs come from stewards and models (the ``reflex.controlSpec`` property, drafts), so parsing is
bounded: a spec is at most :data:`MAX_SPEC_CHARS` long, nests at most :data:`MAX_DEPTH` levels,
holds no YAML anchors or aliases (a few hundred bytes of aliases expand to gigabytes), and every
error is one short line.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reflex_actions.bounded import BoundedYamlError, excerpt, load_bounded_yaml, shorten
from reflex_actions.controls.base import Control
from reflex_actions.errors import ControlSpecError
from reflex_actions.registry import control_class, control_classes

__all__ = [
    "MAX_DEPTH",
    "MAX_SPEC_CHARS",
    "Control",
    "control_spec",
    "dump_control_line",
    "dump_control_yaml",
    "known_controls",
    "load_control_spec",
    "parse_control_spec",
    "parse_control_yaml",
]

#: Longest control spec accepted (characters); real specs are a few hundred.
MAX_SPEC_CHARS = 16 * 1024
#: Deepest nesting of collections in a spec; real specs nest two levels.
MAX_DEPTH = 16
#: Most validation problems listed in one message.
MAX_PROBLEMS = 5


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


def known_controls() -> dict[str, type[Control]]:
    """Control type -> its model, from the registered lesson kinds (read once)."""
    return control_classes()


def _known_types() -> str:
    return ", ".join(sorted(known_controls()))


def parse_control_spec(data: Any) -> Control:
    """Validate a control spec given as a mapping; raise ControlSpecError naming the problem."""
    if not isinstance(data, dict):
        raise ControlSpecError(
            f"a control spec must be a mapping with a 'type' key, got {type(data).__name__}"
        )
    type_name = data.get("type")
    if type_name is None:
        raise ControlSpecError(f"control spec has no 'type'; known types: {_known_types()}")
    control_cls = control_class(type_name) if isinstance(type_name, str) else None
    if control_cls is None:
        raise ControlSpecError(
            f"unknown control type {excerpt(type_name)}; known types: {_known_types()}"
        )
    try:
        return control_cls.model_validate(data)
    except ValidationError as error:
        raise ControlSpecError(_format_validation_error(type_name, error)) from None


@functools.lru_cache(maxsize=256)
def parse_control_yaml(text: str) -> Control:
    """Parse a control spec from YAML text (block, flow or JSON), strictly and boundedly.
    Controls are immutable, so a text parsed before is not parsed again: a sweep reads the
    same spec from thousands of assertions."""
    try:
        data = load_bounded_yaml(text, "control spec", MAX_SPEC_CHARS, MAX_DEPTH)
    except BoundedYamlError as error:
        raise ControlSpecError(str(error)) from None
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


def control_spec(control: Control) -> dict[str, Any]:
    """The canonical spec of a control as a mapping: its type and every non-default field (how
    a lesson stores its control, and what an approval is compared on)."""
    data = control.model_dump(mode="json", exclude_defaults=True)
    return {"type": control.type, **data}


def dump_control_yaml(control: Control) -> str:
    """The canonical YAML text of a control spec (defaults omitted, keys in model order)."""
    return yaml.safe_dump(control_spec(control), sort_keys=False)


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
        control_spec(control),
        Dumper=_OneLineDumper,
        default_flow_style=True,
        sort_keys=False,
        allow_unicode=True,
        width=float("inf"),
    )
    return text.strip()


def spec_line(spec: dict[str, Any]) -> str:
    """A stored control spec (``control_spec``'s form) as ``reflex.controlSpec`` holds it."""
    return dump_control_line(parse_control_spec(spec))
