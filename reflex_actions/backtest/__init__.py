"""Backtests: replay a control over a dataset's historical snapshots and score it against labels."""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: exported name -> the module defining it. The kinds import ``backtest.history`` to be
#: defined, which runs this package first: importing the engine (and DuckDB) here would make
#: loading any kind (``control compile``) start an engine.
_DEFINED_IN = {
    "backtest": "reflex_actions.backtest.engine",
    "backtest_on_engines": "reflex_actions.backtest.merge",
    "merge_reports": "reflex_actions.backtest.merge",
    "History": "reflex_actions.backtest.history",
    "load_history": "reflex_actions.backtest.history",
    "BacktestReport": "reflex_actions.backtest.metrics",
    "DatasetBacktest": "reflex_actions.backtest.metrics",
    "SnapshotOutcome": "reflex_actions.backtest.metrics",
}
__all__ = sorted(_DEFINED_IN)


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first use (PEP 562)."""
    if name not in _DEFINED_IN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_DEFINED_IN[name]), name)
