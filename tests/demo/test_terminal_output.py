"""What the demo prints is terminal text: the report's tables under their header rows, no
markdown escapes, no raw log line for the refusal it stages, and no control character of a
name reaching the terminal (the scenarios' own output: tests/demo/test_scenarios.py)."""

from __future__ import annotations

import logging

import pytest

from reflex_actions.demo.history import PAYMENTS_INCIDENT
from reflex_actions.demo.run import (
    Demo,
    _refused_then_approved,
    _shown_on_a_terminal,
    summary_lines,
)
from reflex_actions.handlers import gates
from reflex_actions.lessons.model import LessonState
from reflex_actions.report.lesson_page import candidates_section
from reflex_actions.similarity.models import Candidate, Exclusion, Resolution, Signal
from reflex_actions.vocabulary import APPROVAL
from tests.stages import PAYMENTS_LESSON

NAME = "sales.*orders* -> [x] | y_"
REASON = "reads sales.orders (sales.orders -> sales.invoices); `not` **bold**"


def hostile_report() -> str:
    resolution = Resolution(
        source_urn="urn:li:dataset:(urn:li:dataPlatform:s3,a,PROD)",
        pattern="duplicate_rows_non_idempotent_retry",
        threshold=0.5,
        candidates=[
            Candidate(
                urn="urn:x",
                name=NAME,
                score=0.9,
                recommended=True,
                signals=[Signal(name="lineage", contribution=0.5, reason=REASON)],
            ),
            Candidate(urn="urn:z", name="b", score=0.25, recommended=False, signals=[]),
        ],
        excluded=[Exclusion(urn="urn:y", name="c_d", reason="missing field <x>")],
    )
    return candidates_section(resolution)


def test_a_table_is_printed_under_its_header_in_aligned_columns() -> None:
    lines = summary_lines(hostile_report())
    widest = len(NAME)
    assert lines[0] == f"{'dataset'.ljust(widest)}  score  recommended  why"
    assert lines[1] == f"{NAME}  0.90   yes          {REASON}"
    assert lines[2] == f"{'b'.ljust(widest)}  0.25   no           "
    assert lines[3] == "- c_d: missing field <x>"
    assert not [line for line in lines if line.startswith("|") or "---" in line]


def test_control_characters_of_a_name_reach_the_terminal_as_their_escapes() -> None:
    said: list[str] = []
    _shown_on_a_terminal(said.append)("dataset \x1b[2Jgone\x07 here\n")
    assert said == ["dataset \\x1b[2Jgone\\x07 here\n"]


def test_the_refusal_the_demo_stages_is_told_not_logged_and_later_ones_are_logged(
    pending: Demo, caplog: pytest.LogCaptureFixture
) -> None:
    said: list[str] = []
    pending.say = said.append
    with caplog.at_level(logging.WARNING):
        lesson = _refused_then_approved(pending, pending.lesson(PAYMENTS_INCIDENT))
    assert lesson.state is LessonState.PUBLISHED
    assert [r for r in caplog.records if r.name == gates.__name__] == []
    assert any(
        line.startswith("       approval refused: urn:li:corpuser:maria is not") for line in said
    )

    with caplog.at_level(logging.WARNING):  # an approval the demo does not stage still warns
        pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "REJECTED", actor="urn:li:corpuser:eve")
    (refused,) = [r for r in caplog.records if r.name == gates.__name__]
    assert refused.levelno == logging.WARNING and "eve" in refused.getMessage()
