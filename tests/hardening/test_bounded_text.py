"""Free text from libraries and users reaches messages cut to a bound, on one line."""

from __future__ import annotations

from reflex_actions.bounded import EXCERPT_CHARS, shorten


def test_shorten_keeps_short_text_and_cuts_long_text_to_its_limit() -> None:
    assert shorten("a  short\n\tmessage") == "a short message"
    long = "word " * 1000
    cut = shorten(long)
    assert len(cut) == EXCERPT_CHARS and cut.endswith("...")
    assert cut[:-3] == long[: EXCERPT_CHARS - 3]
    assert shorten("x" * 11, limit=10) == "xxxxxxx..."
    assert shorten("x" * 10, limit=10) == "x" * 10
