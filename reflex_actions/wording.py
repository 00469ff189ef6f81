"""Counts as people read them: ``1 event``, ``2 events``, never ``1 events`` nor ``event(s)``."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun plural (an ``s`` added) unless the count is one."""
    return f"{count} {noun if count == 1 else noun + 's'}"
