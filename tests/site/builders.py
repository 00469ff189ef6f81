"""Records for the static site's renderer: a lesson with a backtest and a covered dataset."""

from __future__ import annotations

from typing import Any

from reflex_actions.backtest.metrics import Scores, SnapshotOutcome
from reflex_actions.lessons.model import BacktestSummary, Lesson, LessonState
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.report.site import LessonRecord
from tests.handlers.builders import LESSON, PAYMENTS, lesson

#: Snapshots of the backtest: clean, clean, a labelled failure the control caught, clean.
VIOLATIONS = [0, 0, 12, 0]


def outcomes(dataset: str) -> list[SnapshotOutcome]:
    return [
        SnapshotOutcome(
            dataset=dataset,
            snapshot_id=f"2026-09-0{day}",
            path=f"{dataset}/2026-09-0{day}.parquet",
            labelled_failure=bool(count),
            evaluable=True,
            flagged=bool(count),
            violation_count=count,
            verdict=SnapshotOutcome.verdict_for(bool(count), bool(count)),
        )
        for day, count in enumerate(VIOLATIONS, start=1)
    ]


def backtest(*datasets: str) -> BacktestSummary:
    every = [outcome for dataset in datasets for outcome in outcomes(dataset)]
    scores = Scores(**Scores.compute(every, len(datasets), len(datasets)))
    return BacktestSummary(scope=scores, overall=scores, outcomes=every)


def published(**changes: Any) -> Lesson:
    """A lesson published on PAYMENTS, backtested on finance.payments and finance.ledger."""
    fields: dict[str, Any] = {
        "state": LessonState.PUBLISHED,
        "published_scope": [PAYMENTS],
        "backtest": backtest("finance.payments", "finance.ledger"),
        **changes,
    }
    return lesson(**fields)


def record(stored: Lesson, title: str = "Duplicate payments") -> LessonRecord:
    """The lesson as the site reads it from its term: the definition Reflex stored."""
    return LessonRecord(LESSON, title, render_definition(stored, title), stored)
