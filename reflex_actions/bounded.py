"""Untrusted input, bounded: YAML read with limits, and error messages that name a bad value
without repeating it whole, nor a secret pasted into the wrong field.

A spec or an event can hold megabytes (or, through YAML aliases, a structure far larger than its
text); a message quoting it must stay a line a person can read and a log can hold. A config's
field may hold a connection URL put where a name belongs; a message must not log it.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Hashable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from reflex_actions.errors import ReflexError

#: Longest quoted value in a message (characters).
EXCERPT_CHARS = 60
#: Most digits in one YAML integer: Python refuses to parse more than 4300, and the fields
#: name their own, far lower, bounds.
MAX_INT_DIGITS = 1000

Model = TypeVar("Model", bound=BaseModel)

_REPR = reprlib.Repr()
_REPR.maxstring = EXCERPT_CHARS
_REPR.maxother = EXCERPT_CHARS
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def excerpt(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters; never builds the full repr."""
    return _REPR.repr(value)


#: What a message shows in place of a value shaped like a connection string.
HIDDEN = "<a connection string (hidden)>"
#: a setting of a secret, as a libpq DSN (``host=db password=...``) or a URL's query has it
_SECRET_SETTING = re.compile(r"(?:pass(?:word|wd)?|pwd|secret|token|api_?key)\s*=", re.IGNORECASE)


def is_connection_string(text: str) -> bool:
    """Whether ``text`` looks like a connection string that may hold a secret: a URL naming a
    user (``postgresql://svc:pw@host/db``, any ``://...@``) or text setting a password, secret
    or token (a libpq DSN). Linear in the text: a key can be as long as the file."""
    _, separator, rest = text.partition("://")
    return bool(separator and "@" in rest) or _SECRET_SETTING.search(text) is not None


def safe_excerpt(value: object) -> str:
    """A user-given value as an error names it: its :func:`excerpt`, or :data:`HIDDEN` when it
    is a connection string (a secret pasted into a name's field must never reach a log)."""
    return HIDDEN if isinstance(value, str) and is_connection_string(value) else excerpt(value)


def validated(model: type[Model], values: Any, where: str) -> Model:
    """``values`` (the block ``where`` names, e.g. ``action.config``) as ``model``; a
    ReflexError naming the first invalid field and the problem, never the field's value nor
    a key that is a connection string (pydantic names an unknown key in the error's place)."""
    try:
        return model.model_validate(values or {})
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        field = ".".join(
            HIDDEN if isinstance(part, str) and is_connection_string(part) else str(part)
            for part in first["loc"]
        )
        place = f"{where}.{shorten(field, 200)}" if field else where
        raise ReflexError(f"{place}: {first['msg']}") from None


def shorten(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Free text (a library's message, a key path) cut to ``limit`` characters, on one line."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class BoundedYamlError(ReflexError):
    """YAML that is unreadable or exceeds a bound; the message is one short line."""


def _line(mark: yaml.Mark | None) -> str:
    return f" (line {mark.line + 1})" if mark else ""


class _StrictLoader(yaml.SafeLoader):
    """A safe YAML loader that also refuses what Reflex's inputs never need: duplicate keys,
    anchors and aliases (a few hundred bytes of aliases expand to gigabytes), deep nesting and
    huge integers."""

    def __init__(self, stream: str, what: str, max_depth: int) -> None:
        super().__init__(stream)
        self.what = what
        self._max_depth = max_depth
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        event = self.peek_event()
        if getattr(event, "anchor", None) is not None:
            raise BoundedYamlError(
                f"{self.what} uses a YAML anchor or alias{_line(event.start_mark)}; "
                "write each value out instead"
            )
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                raise BoundedYamlError(
                    f"{self.what} nests deeper than {self._max_depth} levels"
                    f"{_line(event.start_mark)}"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, Hashable):
            raise BoundedYamlError(
                f"a mapping key must be a plain value{_line(key_node.start_mark)}"
            )
        if key in seen:
            raise BoundedYamlError(f"duplicate key {safe_excerpt(key)}{_line(key_node.start_mark)}")
        seen.add(key)
    return loader.construct_mapping(node)


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INT_DIGITS:
        raise BoundedYamlError(
            f"a number of {len(node.value)} digits{_line(node.start_mark)}; "
            f"at most {MAX_INT_DIGITS} digits are allowed"
        )
    return loader.construct_yaml_int(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_bounded_yaml(text: str, what: str, max_chars: int, max_depth: int) -> Any:
    """Parse ``text`` (``what`` names it in messages) within these bounds, strictly."""
    if len(text) > max_chars:
        raise BoundedYamlError(
            f"{what} is {len(text)} characters long; at most {max_chars} are allowed"
        )
    loader: _StrictLoader | None = None
    try:  # building the loader already reads the text (a character YAML refuses raises)
        loader = _StrictLoader(text, what, max_depth)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        problem = error.problem or error.context or "unreadable"
        raise BoundedYamlError(
            f"{what} is not valid YAML{_line(error.problem_mark)}: {shorten(problem, 200)}"
        ) from None
    except yaml.YAMLError as error:  # e.g. a character YAML does not accept
        raise BoundedYamlError(f"{what} is not valid YAML: {shorten(str(error), 200)}") from None
    finally:
        if loader is not None:
            loader.dispose()
