"""Untrusted text on the lesson page renders as text: an injected image, link, HTML, heading or
fence-closing line stays inert (issue 11, item 11)."""

from __future__ import annotations

import re

import pytest

from reflex_actions.backtest.metrics import BacktestReport, Scores
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.lessons.model import Evidence, Lesson, LessonState, ProposerInfo
from reflex_actions.report.backtest import render_markdown
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.report.markdown import code, code_block, escape

IMAGE = "![pixel](http://evil.example/p.png)"
HOSTILE = [
    IMAGE,
    "[click](javascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "line one\n\n# Approved by the CFO\n\n---",
    "1. not a list",
    "- not an item",
    "> not a quote",
    "**bold** _em_ ~~gone~~ `code`",
    "a | b | c",
    "&lt;img&gt;",
    "back\\slash \\[",
    "```\n![](http://evil.example/fence.png)\n```",
]
#: CommonMark: a backslash before ASCII punctuation shows that character, literally.
BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
#: Characters that must never reach the page unescaped from untrusted text.
MARKUP = re.compile(r"(?<!\\)[\[\]<>`*|~&]")


def shown(markdown: str) -> str:
    """The text a renderer shows for escaped inline markdown."""
    return BACKSLASH_ESCAPE.sub(r"\1", markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_shows_exactly_itself_on_one_line(text: str) -> None:
    escaped = escape(text)
    assert "\n" not in escaped
    assert shown(escaped) == " ".join(text.split())
    assert not MARKUP.search(BACKSLASH_ESCAPE.sub("", escaped))
    assert not re.match(r"[#+=>-]|\d+[.)]", escaped)


def test_names_stay_readable() -> None:
    assert escape("finance.ledger_entries") == "finance.ledger_entries"
    assert escape("_private_") == "\\_private\\_"


@pytest.mark.parametrize("text", ["plain", "a `tick` here", "``double``", "`", "x\n\ny"])
def test_code_spans_hold_any_backticks(text: str) -> None:
    span = code(text)
    fence = re.match(r"`+", span)
    assert fence is not None and span.endswith(fence.group())
    inner = span[len(fence.group()) : -len(fence.group())]
    longest_inside = max((len(run) for run in re.findall(r"`+", inner)), default=0)
    assert longest_inside < len(fence.group())
    assert inner.strip() == " ".join(text.split())


def test_a_code_block_cannot_be_closed_by_its_content() -> None:
    block = code_block("a: 1\n```\n![](http://evil.example/x.png)\n````\n", "yaml")
    lines = block.splitlines()
    fence = lines[0].removesuffix("yaml")
    assert lines[-1] == fence
    assert all(not line.strip().startswith(fence) for line in lines[1:-1])


def _hostile_lesson(text: str) -> Lesson:
    return Lesson(
        urn="urn:li:glossaryTerm:reflex.lesson.x",
        incident=f"urn:li:incident:{text}",
        source_dataset=f"urn:li:dataset:(urn:li:dataPlatform:hive,{text},PROD)",
        affected_assets=[],
        failure_pattern=DUPLICATE_ROWS,
        root_cause=text,
        evidence=[Evidence(source="description", quote=text)],
        control={"type": "uniqueness", "field": f"id\n```\n{HOSTILE[-1]}"},
        confidence=0.5,
        rationale=text,
        proposer=ProposerInfo(name="llm", model=text, fallback_reason=text),
        state=LessonState.PUBLISHED,
        validation_error=text,
        decisions=[{"decision": text, "actor": text, "at": 1, "detail": text}],
        published_scope=[f"urn:li:dataset:(urn:li:dataPlatform:hive,{text},PROD)"],
        recurrences=[
            {
                "incident": text,
                "dataset": text,
                "snapshot": text,
                "at": 1,
                "resolved": {"by": text, "at": 2, "note": text},
            }
        ],
    )


def _markup_outside_code(markdown: str) -> list[str]:
    """Unescaped markup characters on a page, skipping fenced blocks, code spans (they show
    text verbatim) and backslash escapes, as a CommonMark inline scan does."""
    text = re.sub(r"^(`{3,})yaml\n.*?^\1$", "", markdown, flags=re.S | re.M)
    text = re.sub(r"^> ", "", text, flags=re.M)  # the page's own quote
    found, index = [], 0
    while index < len(text):
        if BACKSLASH_ESCAPE.match(text, index):
            index += 2
            continue
        run = re.match(r"`+", text[index:])
        if run:
            closing = re.compile(rf"(?<!`){run.group()}(?!`)").search(
                text, index + len(run.group())
            )
            if closing:
                index = closing.end()
                continue
        if MARKUP.match(text, index):
            found.append(text[index])
        index += 1
    return found


OWN_HEADINGS = {"#### Root cause", "#### Evidence", "#### Control", "#### Published on",
                "#### Recurrences caught", "#### Decisions"}  # fmt: skip


def test_the_lesson_page_shows_hostile_text_as_text() -> None:
    hostile = " ".join(HOSTILE)
    page = render_definition(_hostile_lesson(hostile), title=hostile)

    # only the page's own bold (title, state, "Needs a fix") is markup
    assert _markup_outside_code(page) == ["*"] * 12
    headings = {line for line in page.splitlines() if line.startswith("#")}
    assert headings == OWN_HEADINGS
    # the control block is closed by its own fence, after the whole spec
    block = re.search(r"^(`{3,})yaml\n(.*?)^\1$", page, flags=re.S | re.M)
    assert block is not None and "field:" in block.group(2) and "fence.png" in block.group(2)


def test_the_backtest_report_escapes_dataset_names_and_reasons() -> None:
    report = BacktestReport.model_validate(
        {
            "control_type": "uniqueness",
            "control": IMAGE,
            "spec": {},
            "datasets": [
                {
                    "dataset": IMAGE,
                    "history": "/h",
                    "applicable": False,
                    "reason": "<img src=x> | cell",
                    "labels_without_snapshot": [],
                    "elapsed_ms": 1.0,
                    **Scores.compute([], candidate_assets=1, applicable_assets=0),
                }
            ],
            "per_snapshot": [],
            "elapsed_ms": 1.0,
            **Scores.compute([], candidate_assets=1, applicable_assets=0),
        }
    )
    markdown = render_markdown(report)
    assert "![" not in BACKSLASH_ESCAPE.sub("", markdown)
    assert "<img" not in BACKSLASH_ESCAPE.sub("", markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_the_similar_assets_table_shows_hostile_names_and_reasons_as_text(text: str) -> None:
    """Dataset names come from urns and reasons quote catalog metadata: one table row each,
    rendered as the text itself."""
    from reflex_actions.report.lesson_page import candidates_section
    from reflex_actions.similarity.models import Candidate, Exclusion, Resolution, Signal

    signal = Signal(name="shares_field", contribution=0.5, reason=text)
    resolution = Resolution(
        source_urn="urn:li:dataset:(urn:li:dataPlatform:s3,a,PROD)",
        pattern=DUPLICATE_ROWS,
        threshold=0.5,
        candidates=[
            Candidate(urn="urn:x", name=text, score=0.9, recommended=True, signals=[signal])
        ],
        excluded=[Exclusion(urn="urn:y", name=text, reason=text)],
    )
    section = candidates_section(resolution)
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert len(rows) == 3  # header, separator, one candidate: no injected row or block
    for line in section.splitlines()[4:]:
        content = line.removeprefix("- ").replace(" | ", " ").strip("| ")
        assert not MARKUP.search(content), line
