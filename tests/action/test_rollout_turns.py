"""A large approval never holds an event back: the approval's decision publishes the first
datasets, the rest goes out in slices beside the events, and an event arriving mid-rollout is
handled before the rollout's next slice (issue 26)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from datahub.emitter.mcp import MetadataChangeProposalWrapper

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.config import ReflexConfig
from reflex_actions.handlers.lesson_store import load_lesson, structured_values
from reflex_actions.handlers.rollout import IN_DECISION, SLICE_DATASETS
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    COVERAGE,
    LIFECYCLE,
    ROOT_CAUSE_STATUS,
    SCOPE,
    SCOPE_RULE,
)
from tests.action.events import lesson_properties_event
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    INTRUDER,
    LESSON,
    PAYMENTS,
    SPEC,
    STEWARD,
    add_dataset,
    pending_lesson,
)

DATASETS = [PAYMENTS] + [
    f"urn:li:dataset:(urn:li:dataPlatform:snowflake,db.t{n:04d},PROD)"
    for n in range(IN_DECISION + 5 * SLICE_DATASETS)
]


class Watched(MemoryCatalog):
    """Says when the rollout's first slice after the approval has written its coverage."""

    def __init__(self) -> None:
        super().__init__()
        self.coverage_writes = 0
        self.first_slice = threading.Event()

    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        super().emit(mcps)
        self.coverage_writes += sum(_is_coverage(m) for m in mcps)
        if self.coverage_writes > IN_DECISION:
            self.first_slice.set()


def _is_coverage(mcp: MetadataChangeProposalWrapper) -> bool:
    return (
        mcp.aspectName == "structuredProperties"
        and mcp.entityUrn is not None
        and mcp.entityUrn.startswith("urn:li:dataset:")
    )


def test_an_event_arriving_mid_rollout_is_handled_before_the_rollout_ends() -> None:
    catalog = Watched()
    for urn in DATASETS:
        add_dataset(catalog, urn)
    pending_lesson(catalog)
    config = ReflexConfig.model_validate({"approvers": {"users": [STEWARD]}})
    action = ReflexAction(config, catalog)
    gates = {
        ROOT_CAUSE_STATUS: ["CONFIRMED"],
        APPROVAL: ["PENDING"],
        CONTROL_SPEC: [SPEC],
        SCOPE: [PAYMENTS],
        SCOPE_RULE: ["{platform: snowflake}"],
    }

    action.act(lesson_properties_event(LESSON, STEWARD, gates, {APPROVAL: ["APPROVED"]}, 7))
    assert catalog.first_slice.wait(timeout=60)
    # an intruder's retirement: refused, its revert written, while the rollout goes on
    published = {**gates, APPROVAL: ["APPROVED"], LIFECYCLE: ["ACTIVE"]}
    action.act(lesson_properties_event(LESSON, INTRUDER, published, {LIFECYCLE: ["RETIRED"]}, 8))
    covered_when_handled = catalog.coverage_writes
    action.close()

    assert IN_DECISION < covered_when_handled < len(DATASETS)  # handled mid-rollout
    assert catalog.coverage_writes == len(DATASETS)  # and the rollout went on to the end
    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None and lesson.rollout is None
    assert lesson.published_count == len(DATASETS)
    assert lesson.decisions[-1].decision == "retirement refused"
    assert all(LESSON in structured_values(catalog, urn, COVERAGE) for urn in DATASETS)
