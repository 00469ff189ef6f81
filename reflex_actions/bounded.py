"""Bounded echoes of untrusted input: error messages name the bad value without repeating it whole.

A spec or an event can hold megabytes (or, through YAML aliases, a structure far larger than its
text); a message quoting it must stay a line a person can read and a log can hold.
"""

from __future__ import annotations

import reprlib

#: Longest quoted value in a message (characters).
EXCERPT_CHARS = 60

_REPR = reprlib.Repr()
_REPR.maxstring = EXCERPT_CHARS
_REPR.maxother = EXCERPT_CHARS
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def excerpt(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters; never builds the full repr."""
    return _REPR.repr(value)


def shorten(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Free text (a library's message, a key path) cut to ``limit`` characters, on one line."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
