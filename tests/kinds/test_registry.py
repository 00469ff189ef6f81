"""The kind registry refuses a kind that cannot load or that takes another's pattern or control
type, by name, when the action starts, not at the first event."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.registry import KindError


@pytest.mark.parametrize(
    ("entry_point", "named"),
    [
        ("broken = tests.plugin_kinds.no_such_module:Kind", "lesson kind broken"),
        ("notakind = reflex_actions.kinds.base:Trigger", "is not a LessonKind"),
        (
            "twin = reflex_actions.kinds.duplicate_rows:DuplicateRowsKind",
            "pattern 'duplicate_rows_non_idempotent_retry' is taken",
        ),
    ],
    ids=["cannot-load", "not-a-kind", "pattern-taken"],
)
def test_a_bad_kind_stops_the_start_naming_it(
    install_kinds: Callable[..., None], tmp_path: Path, entry_point: str, named: str
) -> None:
    install_kinds(entry_point)
    with pytest.raises(KindError, match=named):
        ReflexAction.create({"store": f"{tmp_path}/s.db"}, PipelineContext("p", None))
