"""Backtest outcomes and the metrics computed from them.

Definitions (per dataset, and overall by summing the counts of all datasets):

- A snapshot is *flagged* when the control fails on it (violations above the allowance), and a
  *labelled failure* when ``labels.yaml`` names it.
- true positive = flagged and labelled; false positive = flagged, not labelled;
  true negative = not flagged, not labelled; false negative = labelled, not flagged.
- Snapshots that cannot be evaluated (schema drift, unreadable file) are *not evaluable*: listed
  with their reason and counted apart, never as passes or failures.
- precision = TP / (TP + FP): undefined (null, with the reason) when nothing was flagged.
- recall = TP / (TP + FN): undefined when no labelled failure was evaluable.
- in-sample / held out: when a kind learned the control's parameters (an accepted set, range
  bounds) from some snapshots of the source's history, the outcomes on those snapshots are
  *in-sample* and flatter the control; every other outcome (the source's later snapshots, the
  candidates' histories) is *held out*. Both are scored with the same metrics.
- coverage: how many candidate assets the control applies to (it has a history with at least one
  snapshot holding the fields the control needs), how many snapshots were evaluable, and how many
  labelled failures the control could see (the labelled snapshots that were evaluable).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, get_args

from pydantic import BaseModel

from reflex_actions.backtest.history import LearningSplit

Verdict = Literal[
    "true_positive", "false_positive", "true_negative", "false_negative", "not_evaluable"
]


class SnapshotOutcome(BaseModel):
    """What the control said about one historical snapshot, against its label."""

    dataset: str
    snapshot_id: str
    path: str
    labelled_failure: bool
    incident: str | None = None
    evaluable: bool
    flagged: bool | None = None
    violation_count: int | None = None
    rows_scanned: int | None = None
    sample: list[dict[str, Any]] = []
    #: what a control judging the whole table measured, pass or fail (e.g. a freshness
    #: control's age and bound); None for controls that report none
    measures: dict[str, Any] | None = None
    reason: str | None = None
    #: the other dataset's snapshot it was checked against, and how that was chosen (a
    #: referencing control's child snapshot: "2026-09-14 (the same snapshot id)")
    checked_against: str | None = None
    verdict: Verdict

    @staticmethod
    def verdict_for(flagged: bool, labelled_failure: bool) -> Verdict:
        if flagged:
            return "true_positive" if labelled_failure else "false_positive"
        return "false_negative" if labelled_failure else "true_negative"


class Coverage(BaseModel):
    candidate_assets: int
    applicable_assets: int
    snapshots: int
    evaluable_snapshots: int
    labelled_failures: int
    visible_labelled_failures: int


class Scores(BaseModel):
    """Confusion counts, precision, recall and coverage over a set of snapshot outcomes."""

    true_positives: int
    false_positives: int
    true_negatives: int
    false_negatives: int
    not_evaluable: int
    precision: float | None
    recall: float | None
    #: metric name -> why it is undefined (its value is then null)
    undefined: dict[str, str]
    coverage: Coverage

    @staticmethod
    def compute(
        outcomes: Iterable[SnapshotOutcome], candidate_assets: int, applicable_assets: int
    ) -> dict[str, Any]:
        """The field values of a Scores model for these outcomes."""
        items = list(outcomes)
        count = dict.fromkeys(get_args(Verdict), 0)
        for item in items:
            count[item.verdict] += 1
        tp, fp = count["true_positive"], count["false_positive"]
        fn, tn = count["false_negative"], count["true_negative"]
        undefined: dict[str, str] = {}
        precision = recall = None
        if tp + fp:
            precision = round(tp / (tp + fp), 4)
        else:
            undefined["precision"] = "nothing was flagged"
        if tp + fn:
            recall = round(tp / (tp + fn), 4)
        else:
            undefined["recall"] = "no labelled failure among the evaluable snapshots"
        labelled = [item for item in items if item.labelled_failure]
        return {
            "true_positives": tp,
            "false_positives": fp,
            "true_negatives": tn,
            "false_negatives": fn,
            "not_evaluable": count["not_evaluable"],
            "precision": precision,
            "recall": recall,
            "undefined": undefined,
            "coverage": Coverage(
                candidate_assets=candidate_assets,
                applicable_assets=applicable_assets,
                snapshots=len(items),
                evaluable_snapshots=sum(item.evaluable for item in items),
                labelled_failures=len(labelled),
                visible_labelled_failures=sum(item.evaluable for item in labelled),
            ),
        }


class DatasetBacktest(Scores):
    """The backtest of one candidate dataset."""

    dataset: str
    history: str
    applicable: bool
    #: why the control does not apply to this dataset, when it does not
    reason: str | None = None
    labels_without_snapshot: list[str] = []
    elapsed_ms: float


class BacktestReport(Scores):
    """The whole backtest: overall scores, per-dataset scores, and every snapshot's outcome."""

    control_type: str
    control: str
    spec: dict[str, Any]
    datasets: list[DatasetBacktest]
    per_snapshot: list[SnapshotOutcome]
    elapsed_ms: float

    def outcomes_for(self, dataset: str) -> list[SnapshotOutcome]:
        return [outcome for outcome in self.per_snapshot if outcome.dataset == dataset]

    def scores_on(self, histories: set[str]) -> Scores:
        """The scores of these histories' rows alone (e.g. the scope an approval would publish,
        without the near misses backtested beside it for comparison)."""
        outcomes = [o for o in self.per_snapshot if o.dataset in histories]
        datasets = [d for d in self.datasets if d.dataset in histories]
        return Scores.model_validate(
            Scores.compute(outcomes, len(datasets), sum(d.applicable for d in datasets))
        )


class LearningSplitScores(BaseModel):
    """A backtest's figures on the snapshots the parameters were learned from, and on all the
    others."""

    in_sample: Scores
    held_out: Scores


def in_sample_ids(learned: LearningSplit) -> set[tuple[str, str]]:
    """(dataset, snapshot id) of every snapshot the control's parameters were learned from."""
    return {(learned.dataset, snapshot_id) for snapshot_id in learned.learned}


def learning_split_scores(
    outcomes: Iterable[SnapshotOutcome], learned: LearningSplit
) -> LearningSplitScores:
    """Score the in-sample and the held-out outcomes apart; assets count per part (a dataset
    applies to a part when one of its snapshots there was evaluable)."""
    in_sample = in_sample_ids(learned)
    parts: dict[bool, list[SnapshotOutcome]] = {True: [], False: []}
    for outcome in outcomes:
        parts[(outcome.dataset, outcome.snapshot_id) in in_sample].append(outcome)

    def scored(items: list[SnapshotOutcome]) -> Scores:
        datasets = {item.dataset for item in items}
        applicable = {item.dataset for item in items if item.evaluable}
        return Scores(**Scores.compute(items, len(datasets), len(applicable)))

    return LearningSplitScores(in_sample=scored(parts[True]), held_out=scored(parts[False]))
