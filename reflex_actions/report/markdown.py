"""Markdown built from untrusted text (incident text, model answers, names, error messages).

Pages a steward reads in DataHub are markdown; text that reaches them from an incident, a model or
a snapshot must render as exactly that text, never as an image, a link, HTML, a heading or a
table cell boundary. Every such piece goes through one of these functions. DataHub renders
markdown as GFM (``marked``, ``gfm: true``), which also links bare URLs and emails by itself.
"""

from __future__ import annotations

import re

#: Characters that open or close inline markup anywhere in a line (CommonMark + GFM tables and
#: strikethrough), and what a GFM autolink needs unbroken: a URL's ``://``, ``www.``, an email's
#: ``@``. ``_`` is handled apart: between two word characters it never delimits.
_INLINE_MARKUP = re.compile(r"[\\`*\[\]<>|~&@]|:(?=//)|(?<=[wW]{3})\.")
_UNDERSCORES = re.compile(r"(?<![^\W_])_+|_+(?![^\W_])")
#: Markers that make a line a heading, list item, quote or rule when they lead it.
_LEADING_BLOCK_MARKER = re.compile(r"^(?:([#+=-])|(\d+)(?=[.)]))")
_BACKTICK_RUN = re.compile(r"`+")


def _one_line(text: object) -> str:
    """Whitespace (newlines included) collapsed: inline text can never start a new block."""
    return " ".join(str(text).split())


def escape(text: object) -> str:
    """``text`` as inline markdown that renders as itself, on one line."""
    line = _INLINE_MARKUP.sub(lambda match: "\\" + match.group(), _one_line(text))
    line = _UNDERSCORES.sub(lambda match: "\\_" * len(match.group()), line)
    return _LEADING_BLOCK_MARKER.sub(_escape_block_marker, line, count=1)


def _escape_block_marker(match: re.Match[str]) -> str:
    marker, number = match.groups()
    return "\\" + marker if marker else number + "\\"  # 1. -> 1\. (the dot is the marker)


def _fence_for(text: str, shortest: int) -> str:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    return "`" * max(shortest, longest + 1)


def code(text: object) -> str:
    """``text`` as an inline code span: shown verbatim (one line), whatever backticks it holds."""
    line = _one_line(text)
    fence = _fence_for(line, 1)
    padded = f" {line} " if line.startswith("`") or line.endswith("`") else line
    return f"{fence}{padded}{fence}"


def code_cell(text: object) -> str:
    """``text`` as an inline code span in a table cell: a GFM table splits its row on every
    unescaped ``|``, inside code spans too, and shows an escaped one as ``|``."""
    return code(text).replace("|", "\\|")


def code_block(text: str, language: str = "") -> str:
    """``text`` as a fenced code block whose fence no line of ``text`` can close."""
    fence = _fence_for(text, 3)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


#: What :func:`plain` undoes: a code span (its fence, then the shortest text up to a closing
#: fence of the same length), a backslash escape, or a ``**`` emphasis marker.
_INLINE_TOKEN = re.compile(r"(`+)(.*?)(?<!`)\1(?!`)|\\([!-/:-@\[-`{-~])|\*\*")
#: A table cell and the unescaped ``|`` that ends it.
_CELL = re.compile(r"((?:\\.|[^\\|])*)\|")
_DELIMITER_CELL = re.compile(r":?-+:?")


def plain(markdown: str) -> str:
    """The text Reflex's inline markdown (:func:`escape`, :func:`code`, ``**bold**``) shows,
    for a reader that renders none: a terminal."""

    def shown(match: re.Match[str]) -> str:
        fence, span, escaped = match.groups()
        if fence is None:
            return escaped or ""  # an escaped character, or an emphasis marker
        padded = span.startswith(" ") and span.endswith(" ") and span.strip()
        return span[1:-1] if padded else span

    return _INLINE_TOKEN.sub(shown, markdown)


def table_cells(row: str) -> list[str] | None:
    """The cells of a row of a GFM table Reflex wrote (``| a | b |``) as :func:`plain` text;
    None for the delimiter row under the header (``| --- | --- |``)."""
    cells = [cell.strip() for cell in _CELL.findall(row.strip().removeprefix("|"))]
    if all(_DELIMITER_CELL.fullmatch(cell) for cell in cells):
        return None
    return [plain(cell.replace("\\|", "|")) for cell in cells]
