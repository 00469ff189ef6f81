"""The schedule's sweep never holds an event back: it works in slices, and an event that
arrives mid-sweep is handled before the sweep's next slice (DESIGN §4, issue 26)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
)
from datahub_actions.event.event_envelope import EventEnvelope

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.config import ReflexConfig
from reflex_actions.handlers.scheduled import SLICE_DATASETS
from reflex_actions.times import now_ms
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS, SCOPE
from tests.action.events import lesson_properties_event
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import INTRUDER, LESSON, PAYMENTS, pending_lesson, published_on, seed

SWEPT = "urn:li:glossaryTerm:reflex.lesson.swept"
FRESHNESS = {"type": "freshness", "max_age": "26h"}
DATASETS = [
    f"urn:li:dataset:(urn:li:dataPlatform:snowflake,db.t{n:04d},PROD)"
    for n in range(5 * SLICE_DATASETS)
]


class Watched(MemoryCatalog):
    """Says when the sweep's first slice has written its run events."""

    def __init__(self) -> None:
        super().__init__()
        self.first_slice = threading.Event()

    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        super().emit(mcps)
        if any(isinstance(m.aspect, AssertionRunEventClass) for m in mcps):
            self.first_slice.set()


def _run_events(catalog: MemoryCatalog) -> int:
    return sum(isinstance(w.aspect, AssertionRunEventClass) for w in catalog.writes)


def _covered_estate(catalog: MemoryCatalog) -> None:
    """A freshness lesson in force on every dataset (none of them has an update recorded:
    each sweep judges, and fails, every one), and a lesson waiting for approval."""
    seed(catalog, *published_on(SWEPT, FRESHNESS, DATASETS))
    pending_lesson(catalog)


def _intruders_approval() -> EventEnvelope:
    before = {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["PENDING"], SCOPE: [PAYMENTS]}
    return lesson_properties_event(LESSON, INTRUDER, before, {APPROVAL: ["APPROVED"]}, 7)


def test_an_event_arriving_mid_sweep_is_handled_before_the_sweep_ends() -> None:
    catalog = Watched()
    _covered_estate(catalog)
    config = ReflexConfig.model_validate({"schedule": {"interval": "1h"}})
    action = ReflexAction(config, catalog)

    action.on_tick(now_ms())
    assert catalog.first_slice.wait(timeout=60)
    action.act(_intruders_approval())
    judged_when_handled = _run_events(catalog)
    action.close()

    assert SLICE_DATASETS <= judged_when_handled < len(DATASETS)  # handled mid-sweep
    assert _run_events(catalog) == len(DATASETS)  # and the sweep went on to the end
    refusal = next(
        n
        for n, w in enumerate(catalog.writes)
        if w.entityUrn == LESSON and w.aspectName == "structuredProperties"
    )
    last_run = max(
        n for n, w in enumerate(catalog.writes) if isinstance(w.aspect, AssertionRunEventClass)
    )
    assert refusal < last_run
