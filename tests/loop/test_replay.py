"""Redelivery: replaying the whole event log after the loop changes nothing in the store.

URNs are deterministic (DESIGN.md §2) and handlers check what is already there, so a second
delivery of every event — as after a lost offset — must leave every row as it was.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from datahub.metadata.schema_classes import AssertionRunEventClass
from datahub_actions.pipeline.pipeline import Pipeline

from reflex_actions.demo.run import embedded_pipeline_config
from tests.loop.store import Row, all_rows, store_of
from tests.stages import FullLoop

OFFSET_SUFFIX = ".reflex-offset"


@dataclass(frozen=True)
class Replay:
    before: list[Row]
    after: list[Row]
    offset_rewritten: bool


@pytest.fixture(scope="module")
def replay(full_loop: FullLoop) -> Iterator[Replay]:
    """Delete the source's offset and run the pipeline again over the whole log.

    Works on the session's loop in place (stored paths point into its folder) and puts the
    folder back afterwards, so other tests still see the loop as the demo left it.
    """
    workdir = full_loop.workdir
    backup = workdir.with_name(workdir.name + "-before-replay")
    shutil.copytree(workdir, backup)
    try:
        store = store_of(workdir)
        offset = store.with_name(store.name + OFFSET_SUFFIX)
        assert offset.is_file()
        before = all_rows(store)
        offset.unlink()
        pipeline = Pipeline.create(embedded_pipeline_config(workdir))
        try:
            pipeline.run()
        finally:
            pipeline.close()
        yield Replay(before, all_rows(store), offset.is_file())
    finally:
        shutil.rmtree(workdir)
        backup.rename(workdir)


def test_the_replay_read_the_whole_log_again(replay: Replay) -> None:
    assert replay.offset_rewritten
    assert len(replay.before) > 300  # the estate, two lessons, assertions, incidents


def test_replay_changes_no_entity_aspect(replay: Replay) -> None:
    """No second incident B, no duplicate assertion, no new version of any versioned aspect."""
    run_events = AssertionRunEventClass.ASPECT_NAME
    before = [row for row in replay.before if row[1] != run_events]
    after = [row for row in replay.after if row[1] != run_events]
    assert after == before


def test_replay_leaves_every_row_unchanged(replay: Replay) -> None:
    assert replay.after == replay.before
