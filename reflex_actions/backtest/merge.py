"""One backtest over histories read by different engines: a backtest runs on one engine (its
workers are that engine's), so the histories are grouped by the engine reading them, each group
backtested, and the reports merged into the one a single backtest would have given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reflex_actions.backtest.engine import DEFAULT_MEMORY_LIMIT, DEFAULT_SAMPLE_SIZE, backtest
from reflex_actions.backtest.history import History
from reflex_actions.backtest.metrics import BacktestReport, Scores
from reflex_actions.controls import Control
from reflex_actions.engines.base import Engine


def merge_reports(reports: Sequence[BacktestReport]) -> BacktestReport:
    """The backtests of one control run apart as one report: their datasets and outcomes in the
    reports' order, scored over all the outcomes together (as one backtest of every history
    scores them), and the time they took in all."""
    if not reports:
        raise ValueError("no backtest to merge")
    first = reports[0]
    if any(report.spec != first.spec for report in reports[1:]):
        raise ValueError("only backtests of one control merge into one report")
    datasets = [dataset for report in reports for dataset in report.datasets]
    outcomes = [outcome for report in reports for outcome in report.per_snapshot]
    scores = Scores.compute(
        outcomes,
        candidate_assets=len(datasets),
        applicable_assets=sum(dataset.applicable for dataset in datasets),
    )
    elapsed_ms = round(sum(report.elapsed_ms for report in reports), 3)
    return BacktestReport.model_validate(
        first.model_dump()
        | scores
        | {"datasets": datasets, "per_snapshot": outcomes, "elapsed_ms": elapsed_ms}
    )


def backtest_on_engines(
    control: Control,
    histories: Sequence[tuple[History, Engine | None]],
    *,
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    controls_by_dataset: Mapping[str, Control] | None = None,
    references: Mapping[Engine | None, Mapping[str, History]] | None = None,
) -> BacktestReport:
    """Backtest ``control`` on each history with the engine reading its points (None: the
    embedded DuckDB, for a folder's files), one backtest per engine, merged; the datasets and
    their outcomes stay in the order the histories are given. ``references`` are, for each
    engine, the parent histories its children are checked against (:func:`backtest`'s, by
    dataset urn): a parent is read by the child's query, so by the same engine. The other
    arguments are :func:`backtest`'s, for every group."""
    groups: dict[Engine | None, list[History]] = {}
    for history, engine in histories:
        groups.setdefault(engine, []).append(history)
    merged = merge_reports(
        [
            backtest(
                control,
                group,
                engine=engine,
                sample_size=sample_size,
                memory_limit=memory_limit,
                controls_by_dataset=controls_by_dataset,
                references=(references or {}).get(engine),
            )
            for engine, group in groups.items()
        ]
    )
    rank = {
        name: index for index, name in enumerate(dict.fromkeys(h.dataset for h, _ in histories))
    }
    return merged.model_copy(
        update={
            "datasets": sorted(merged.datasets, key=lambda dataset: rank[dataset.dataset]),
            "per_snapshot": sorted(merged.per_snapshot, key=lambda outcome: rank[outcome.dataset]),
        }
    )
