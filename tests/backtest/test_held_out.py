"""No peeking: a kind learns its parameters from the earlier snapshots of the source's history;
the backtest reports the snapshots it learned from (in-sample) apart from all the others
(held out), and the lesson page says which were used for what."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.history import History, LearningSplit, split_for_learning
from reflex_actions.backtest.metrics import learning_split_scores
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.controls import parse_control_spec
from reflex_actions.kinds.invalid_values import INVALID_VALUES
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.drafting import draft_lesson
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.llm import LlmConfig, LlmProposer
from reflex_actions.lessons.model import IncidentText, Lesson, LessonDraft
from reflex_actions.report.lesson_page import learning_section, render_definition
from reflex_actions.testing.estate import InMemoryCatalog
from tests.conftest import write_snapshot

MODEL = "openai/gpt-4o-mini"  # never called: litellm answers the mock response
INCIDENT = "urn:li:incident:unknown-currency"
TEXT = IncidentText(urn=INCIDENT, title="Unknown currency codes in payments")
SOURCE = DatasetContext(
    urn="urn:li:dataset:(urn:li:dataPlatform:snowflake,payments,PROD)",
    name="payments",
    platform="snowflake",
    fields=(
        FieldInfo(name="transaction_id", type="string", is_key=True),
        FieldInfo(name="currency", type="string"),
    ),
)
NORMAL = ["EUR", "GBP", "USD", None]
#: payments: d4 is the incident's snapshot; CHF, rare but normal, first shows in the late d7
PAYMENTS = {
    "d1": NORMAL,
    "d2": ["EUR", "USD"],
    "d3": NORMAL,
    "d4": ["EUR", "XXX", "XXX"],
    "d5": ["GBP", "EUR"],
    "d6": NORMAL,
    "d7": ["EUR", "CHF"],
}


def write_currencies(
    folder: Path, snapshots: dict[str, list[str | None]], labels: list[dict[str, str]]
) -> History:
    """One snapshot per id (CSV for every other one), and these failure labels."""
    for index, (snapshot_id, currencies) in enumerate(snapshots.items()):
        rows = [
            {"transaction_id": f"{snapshot_id}-{i}", "currency": c}
            for i, c in enumerate(currencies)
        ]
        write_snapshot(folder / f"{snapshot_id}.{'csv' if index % 2 else 'parquet'}", rows)
    (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": labels}))
    return load_history(folder)


def payments(tmp_path: Path) -> History:
    return write_currencies(
        tmp_path / "payments", PAYMENTS, [{"snapshot": "d4", "incident": INCIDENT}]
    )


def drafted(history: History) -> Lesson:
    facts = IncidentFacts(source=SOURCE, history=history, catalog=InMemoryCatalog([SOURCE]))
    return draft_lesson("urn:li:glossaryTerm:lesson", TEXT, facts, DeterministicProposer())


# --- the split -----------------------------------------------------------------------------------
def test_the_earlier_two_thirds_of_the_normal_snapshots_learn_the_rest_is_held_out(
    tmp_path: Path,
) -> None:
    split = split_for_learning(payments(tmp_path), ["d4"])
    # 6 normal snapshots: the first 4 learn; the incident's d4 is in-sample, whatever its place
    assert split == LearningSplit(
        dataset="payments",
        normal=["d1", "d2", "d3", "d5"],
        failures=["d4"],
        held_out=["d6", "d7"],
        note=None,
    )
    assert split.learned == ["d1", "d2", "d3", "d4", "d5"]


def test_another_incidents_failure_and_an_unreadable_snapshot_are_held_out(
    tmp_path: Path,
) -> None:
    history = write_currencies(
        tmp_path / "payments",
        {"a1": NORMAL, "a2": ["ZZZ"], "a3": NORMAL, "a4": NORMAL, "a5": ["XXX"], "a6": NORMAL},
        [{"snapshot": "a2"}, {"snapshot": "a5", "incident": INCIDENT}],
    )
    # a3 cannot be read with the columns the kind needs: it teaches nothing, so it is held out
    split = split_for_learning(history, ["a5"], readable=["a1", "a2", "a4", "a5", "a6"])
    assert (split.normal, split.failures, split.held_out) == (
        ["a1", "a4"],
        ["a5"],
        ["a2", "a3", "a6"],
    )


@pytest.mark.parametrize("normal_days", [1, 2])
def test_too_few_normal_snapshots_to_hold_any_out_is_said(tmp_path: Path, normal_days: int) -> None:
    snapshots = {f"n{i}": NORMAL for i in range(normal_days)} | {"z9": ["XXX"]}
    history = write_currencies(
        tmp_path / "payments", snapshots, [{"snapshot": "z9", "incident": INCIDENT}]
    )
    split = split_for_learning(history, ["z9"])
    assert (split.normal, split.held_out) == ([f"n{i}" for i in range(normal_days)], [])
    assert split.note == (
        f"only {normal_days} normal snapshot(s): all were learned from, none could be held out"
    )


# --- the kind learns from the learning part only -------------------------------------------------
def test_invalid_values_learn_the_accepted_set_from_the_earlier_snapshots_only(
    tmp_path: Path,
) -> None:
    lesson = drafted(payments(tmp_path))
    assert lesson.failure_pattern == INVALID_VALUES
    # learning from every normal snapshot would accept CHF, seen only in the held-out d7
    assert lesson.control == {
        "type": "accepted_values",
        "field": "currency",
        "values": ["EUR", "GBP", "USD"],
    }
    assert lesson.learned_from is not None
    assert (lesson.learned_from.learned, lesson.learned_from.held_out) == (
        ["d1", "d2", "d3", "d4", "d5"],
        ["d6", "d7"],
    )
    assert (
        "history",
        "currency holds 3 distinct values in the 4 normal snapshots learned from; d4 has 2 "
        "rows with values never seen before: 'XXX' (2)",
    ) in {(e.source, e.quote) for e in lesson.evidence}


def test_the_learned_snapshots_are_stored_with_the_lesson(tmp_path: Path) -> None:
    lesson = drafted(payments(tmp_path))
    stored = Lesson.model_validate_json(lesson.model_dump_json())  # as its glossary term keeps it
    assert stored.learned_from == lesson.learned_from
    older = lesson.model_dump(mode="json", exclude={"learned_from"})  # stored before this field
    assert Lesson.model_validate(older).learned_from is None


def test_a_kind_that_learns_nothing_records_no_learned_snapshots(tmp_path: Path) -> None:
    history = payments(tmp_path)
    facts = IncidentFacts(source=SOURCE, history=history, catalog=InMemoryCatalog([SOURCE]))
    text = IncidentText(urn=INCIDENT, title="Duplicate rows in payments")
    lesson = draft_lesson("urn:li:glossaryTerm:lesson", text, facts, DeterministicProposer())
    assert lesson.failure_pattern != INVALID_VALUES
    assert lesson.learned_from is None


def test_a_model_reads_no_history_so_its_draft_learned_from_none(tmp_path: Path) -> None:
    """An LLM is never asked which snapshots it learned from, and a claim it makes anyway is
    dropped: only Reflex's own reading of the history says what was learned from it."""
    assert "learned_from" not in LessonDraft.model_json_schema()["properties"]
    claim = {"dataset": "payments", "normal": ["d1"], "failures": [], "held_out": []}
    answer = LessonDraft(
        failure_pattern=INVALID_VALUES,
        root_cause="Unknown currencies.",
        control={"type": "accepted_values", "field": "currency", "values": ["EUR"]},
        confidence=0.6,
    ).model_dump(mode="json") | {"learned_from": claim}
    model = LlmProposer(LlmConfig(model=MODEL, params={"mock_response": json.dumps(answer)}))
    facts = IncidentFacts(
        source=SOURCE, history=payments(tmp_path), catalog=InMemoryCatalog([SOURCE])
    )
    lesson = draft_lesson("urn:li:glossaryTerm:lesson", TEXT, facts, model)
    assert lesson.proposer.name == "llm"
    assert lesson.learned_from is None


# --- the split figures ---------------------------------------------------------------------------
def test_the_held_out_figures_show_the_false_positive_the_in_sample_ones_hide(
    tmp_path: Path,
) -> None:
    source = payments(tmp_path)
    candidate = write_currencies(
        tmp_path / "fx_rates", {"d1": NORMAL, "d2": ["EUR", "XXX"]}, [{"snapshot": "d2"}]
    )
    lesson = drafted(source)
    assert lesson.control is not None and lesson.learned_from is not None
    # the set learned from every normal snapshot (CHF included) backtests perfectly on them
    peeked = {
        "type": "accepted_values",
        "field": "currency",
        "values": ["CHF", "EUR", "GBP", "USD"],
    }
    assert backtest(parse_control_spec(peeked), [source]).false_positives == 0
    report = backtest(parse_control_spec(lesson.control), [source, candidate])
    scores = learning_split_scores(report.per_snapshot, lesson.learned_from)
    inside, held_out = scores.in_sample, scores.held_out
    # in-sample: d4 caught, d1 d2 d3 d5 clean -- it looks perfect
    assert (inside.true_positives, inside.false_positives) == (1, 0)
    assert (inside.true_negatives, inside.false_negatives) == (4, 0)
    assert (inside.precision, inside.recall) == (1.0, 1.0)
    # held out: payments' d6 clean and d7 flagged (CHF); fx_rates' d1 clean and d2 caught
    assert (held_out.true_positives, held_out.false_positives) == (1, 1)
    assert (held_out.true_negatives, held_out.false_negatives) == (2, 0)
    assert (held_out.precision, held_out.recall) == (0.5, 1.0)
    assert (held_out.coverage.candidate_assets, held_out.coverage.snapshots) == (2, 4)
    assert inside.coverage.candidate_assets == 1


def test_the_page_shows_both_figures_and_which_snapshots_were_used_for_what(
    tmp_path: Path,
) -> None:
    source = payments(tmp_path)
    candidate = write_currencies(
        tmp_path / "fx_rates", {"d1": NORMAL, "d2": ["EUR", "XXX"]}, [{"snapshot": "d2"}]
    )
    lesson = drafted(source)
    assert lesson.control is not None
    report = backtest(parse_control_spec(lesson.control), [source, candidate])
    section = learning_section(report, lesson.learned_from)
    assert "| in-sample (learned from) | 5 | 1 | 0 | 4 | 0 | 0 | 100% | 100% |" in section
    assert "| held out | 4 | 1 | 1 | 2 | 0 | 0 | 50% | 100% |" in section, section
    assert "- learned from: payments d1, d2, d3, d5 and the incident's d4" in section
    assert "- held out: payments d6, d7; fx_rates d1, d2" in section


def test_the_section_says_when_nothing_could_be_held_out_and_escapes_names(
    tmp_path: Path,
) -> None:
    history = write_currencies(
        tmp_path / "pay*ments",
        {"_n1": NORMAL, "z9": ["XXX"]},
        [{"snapshot": "z9", "incident": INCIDENT}],
    )
    lesson = drafted(history)
    assert lesson.control is not None and lesson.learned_from is not None
    report = backtest(parse_control_spec(lesson.control), [history])
    section = learning_section(report, lesson.learned_from)
    assert "- learned from: pay\\*ments \\_n1 and the incident's z9" in section
    assert "- held out: none" in section
    assert (
        "In pay\\*ments, only 1 normal snapshot(s): all were learned from, none could be held "
        "out." in section
    )
    assert "| held out | 0 | 0 | 0 | 0 | 0 | 0 | n/a (nothing was flagged) |" in section


def test_the_drafted_lesson_page_says_which_snapshots_were_learned_from(tmp_path: Path) -> None:
    page = render_definition(drafted(payments(tmp_path)), "Unknown currencies")
    assert (
        "Its parameters were learned from payments d1, d2, d3, d5 and the incident's d4; held "
        "out for the backtest: payments d6, d7." in page
    )


def test_no_section_when_the_lesson_learned_nothing(tmp_path: Path) -> None:
    history = payments(tmp_path)
    control = parse_control_spec(
        {"type": "accepted_values", "field": "currency", "values": ["EUR"]}
    )
    assert learning_section(backtest(control, [history]), None) == ""


def test_a_long_history_is_listed_by_its_span(tmp_path: Path) -> None:
    snapshots: dict[str, list[str | None]] = {f"d{i:02d}": NORMAL for i in range(40)}
    snapshots["d40"] = ["XXX"]
    history = write_currencies(
        tmp_path / "payments", snapshots, [{"snapshot": "d40", "incident": INCIDENT}]
    )
    lesson = drafted(history)
    assert lesson.control is not None
    report = backtest(parse_control_spec(lesson.control), [history])
    section = learning_section(report, lesson.learned_from)
    # 40 normal snapshots: the first 27 learn, the last 13 are held out
    assert "- learned from: payments 27 snapshots d00 … d26 and the incident's d40" in section
    assert "- held out: payments 13 snapshots d27 … d39" in section
