"""Counting how often a control is compiled: what a rendered-control cache must save."""

from __future__ import annotations

import pytest

from reflex_actions.controls.uniqueness import UniquenessControl


def count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each compile of a uniqueness control from now on, as its relation's ``text_only``."""
    compiled: list[bool] = []
    original = UniquenessControl.compile

    def counting(self: UniquenessControl, relation, sample_size: int = 5):  # type: ignore[no-untyped-def]
        compiled.append(relation.text_only)
        return original(self, relation, sample_size)

    monkeypatch.setattr(UniquenessControl, "compile", counting)
    return compiled
