"""Shared stages of the loop on the embedded store, built once per session and copied per test.

Building a stage runs the real datahub-actions pipeline (``reflex-lite`` source, ``reflex``
action) like ``datahub-reflex demo``; tests that change a stage work on their own copy. Nothing
stored depends on the folder a stage was built in, except report text.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.steward import resolve_incident
from reflex_actions.demo.history import PAYMENTS_INCIDENT, generate_histories
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.demo.run import PAYMENTS_NOTE, STEWARD, Demo, run_demo
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS

PAYMENTS_LESSON = lesson_urn_for(PAYMENTS_INCIDENT)


@dataclass(frozen=True)
class FullLoop:
    workdir: Path
    lines: list[str]
    closed: bool


@pytest.fixture(scope="session")
def full_loop(tmp_path_factory: pytest.TempPathFactory) -> FullLoop:
    """``run_demo``: both scenarios end to end, once per session (read-only for tests)."""
    workdir = tmp_path_factory.mktemp("full-loop") / "demo"
    lines: list[str] = []
    loggers = [logging.getLogger(name) for name in ("datahub_actions", "reflex_actions")]
    levels = [logger.level for logger in loggers]
    try:
        closed = run_demo(workdir, say=lines.append)
    finally:  # run_demo quiets these loggers for its own output; give other tests them back
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return FullLoop(workdir, lines, closed)


def demo_with_resolved(workdir: Path, incident: str, note: str) -> Demo:
    """A new demo folder: the estate loaded and ``incident`` resolved by the steward, with the
    pipeline caught up (the caller closes the demo's catalog)."""
    workdir.mkdir()
    generate_histories(workdir / "snapshots")
    demo = Demo(workdir, say=lambda _: None)
    demo.catalog.emit([*bootstrap_mcps(), *estate_mcps()])
    demo.react()
    resolve_incident(demo.catalog, incident, note, STEWARD)
    demo.react()
    return demo


@pytest.fixture(scope="session")
def payments_drafted_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scenario 1 up to human gate 1: incident A resolved, the payments lesson drafted."""
    workdir = tmp_path_factory.mktemp("payments-drafted") / "demo"
    demo = demo_with_resolved(workdir, PAYMENTS_INCIDENT, PAYMENTS_NOTE)
    try:
        assert demo.lesson(PAYMENTS_INCIDENT).state is LessonState.PROPOSED
    finally:
        demo.catalog.close()
    return workdir


@pytest.fixture(scope="session")
def payments_pending_template(
    payments_drafted_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Scenario 1 up to human gate 2: the payments lesson confirmed, backtested, and waiting
    for approval (reflex.approval = PENDING)."""
    workdir = tmp_path_factory.mktemp("payments-pending") / "demo"
    with _copy_of(payments_drafted_template, workdir) as demo:
        demo.steward_sets(PAYMENTS_LESSON, ROOT_CAUSE_STATUS, "CONFIRMED")
        assert demo.lesson(PAYMENTS_INCIDENT).state is LessonState.PENDING_APPROVAL
    return workdir


@contextmanager
def _copy_of(template: Path, workdir: Path) -> Iterator[Demo]:
    shutil.copytree(template, workdir)
    demo = Demo(workdir, say=lambda _: None)
    try:
        yield demo
    finally:
        demo.catalog.close()


@pytest.fixture
def drafted(payments_drafted_template: Path, tmp_path: Path) -> Iterator[Demo]:
    """A private copy of the drafted stage."""
    with _copy_of(payments_drafted_template, tmp_path / "demo") as demo:
        yield demo


@pytest.fixture
def pending(payments_pending_template: Path, tmp_path: Path) -> Iterator[Demo]:
    """A private copy of the pending-approval stage."""
    with _copy_of(payments_pending_template, tmp_path / "demo") as demo:
        yield demo


@pytest.fixture
def published(pending: Demo) -> Demo:
    """A private copy with the payments lesson approved by the steward and published."""
    pending.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")
    assert pending.lesson(PAYMENTS_INCIDENT).state is LessonState.PUBLISHED
    return pending
