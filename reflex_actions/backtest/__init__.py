"""Backtests: replay a control over a dataset's historical snapshots and score it against labels."""

from reflex_actions.backtest.engine import backtest
from reflex_actions.backtest.history import History, load_history
from reflex_actions.backtest.metrics import BacktestReport, DatasetBacktest, SnapshotOutcome

__all__ = [
    "BacktestReport",
    "DatasetBacktest",
    "History",
    "SnapshotOutcome",
    "backtest",
    "load_history",
]
