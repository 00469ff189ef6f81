"""Conformance suites a lesson kind opts into, in this package or another one.

As dbt-tests-adapter ships its ``Base*`` classes, this module ships one class per behaviour a
kind must get right; a kind's test module subclasses those it implements and gives its case::

    from reflex_actions.testing import BaseKindParsing, BaseKindRuns, ControlCase

    class TestMyKind(BaseKindParsing, BaseKindRuns):
        kind_pattern = "my_pattern"
        control_case = ControlCase(...)

``BaseLessonKindConformance`` is all of them. Importing this module needs pytest (a test
dependency), which nothing else in the package imports.
"""

from reflex_actions.testing.cases import HOSTILE_NAMES, ControlCase, write_snapshot
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import (
    BaseKindBacktest,
    BaseKindParsing,
    BaseKindRuns,
    BaseKindSignals,
    BaseKindWords,
    BaseLessonKindConformance,
    KindCase,
    kind_suites,
)

__all__ = [
    "HOSTILE_NAMES",
    "BaseKindBacktest",
    "BaseKindParsing",
    "BaseKindRuns",
    "BaseKindSignals",
    "BaseKindWords",
    "BaseLessonKindConformance",
    "ControlCase",
    "InMemoryCatalog",
    "KindCase",
    "kind_suites",
    "write_snapshot",
]
