"""What a schedule sweep's slice costs the embedded store: its incidents B in one write, and
each write's current rows read once (issue 26)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.controls import parse_control_spec
from reflex_actions.handlers.assertions import assertion_mcp
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.directives import Emit, Outbox, SaveLesson
from reflex_actions.handlers.lesson_store import lesson_term_mcp
from reflex_actions.handlers.scheduled import _in_one_write, on_schedule
from reflex_actions.lessons.model import ApprovedVersion, LessonState
from reflex_actions.times import now_ms
from reflex_actions.vocabulary import APPROVAL, COVERAGE, ROOT_CAUSE_STATUS
from tests.handlers.builders import INTRUDER, REFLEX, lesson

SWEPT = "urn:li:glossaryTerm:reflex.lesson.swept"
FRESHNESS = {"type": "freshness", "max_age": "26h"}
STALE_SINCE = now_ms() - 72 * 3600 * 1000
DATASETS = [f"urn:li:dataset:(urn:li:dataPlatform:snowflake,db.t{n:02d},PROD)" for n in range(12)]


class Counted(LiteCatalog):
    """The embedded store, recording each batch written and each statement run."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches: list[list[str | None]] = []
        self.statements: list[str] = []
        self._db.set_trace_callback(self.statements.append)

    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        self.batches.append([mcp.aspectName for mcp in mcps])
        super().emit(mcps)


def _estate(catalog: LiteCatalog) -> None:
    """A freshness lesson in force on 12 datasets, each last updated three days ago: the
    sweep fails each one (incident B) in one slice."""
    control = parse_control_spec(FRESHNESS)
    swept = lesson(
        urn=SWEPT,
        control=FRESHNESS,
        state=LessonState.PUBLISHED,
        published_scope=DATASETS,
        gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"},
        approved=ApprovedVersion(
            control=FRESHNESS, scope=DATASETS, actor=INTRUDER, at=1,
            digest=ApprovedVersion.digest_of(FRESHNESS, DATASETS),
        ),
    )  # fmt: skip
    coverage = StructuredPropertiesClass(
        properties=[StructuredPropertyValueAssignmentClass(propertyUrn=COVERAGE, values=[SWEPT])]
    )
    catalog.emit(
        [
            *(assertion_mcp(swept, dataset, control, REFLEX) for dataset in DATASETS),
            *(acting_as(REFLEX, dataset, coverage) for dataset in DATASETS),
            lesson_term_mcp(swept, "swept", REFLEX),
            *(
                acting_as(
                    "urn:li:corpuser:loader",
                    dataset,
                    OperationClass(
                        timestampMillis=STALE_SINCE,
                        operationType=OperationTypeClass.INSERT,
                        lastUpdatedTimestamp=STALE_SINCE,
                    ),
                )
                for dataset in DATASETS
            ),
        ]
    )


def test_a_slice_writes_its_incidents_in_one_batch_and_reads_each_batchs_rows_once(
    tmp_path: Path,
) -> None:
    catalog = Counted(tmp_path / "s.db")
    _estate(catalog)
    catalog.batches.clear()
    catalog.statements.clear()
    ctx = HandlerContext(catalog=catalog, config=ReflexConfig(store=tmp_path / "s.db"))

    counts = on_schedule(ctx, now_ms(), 3600)

    assert (counts.judged, counts.failed) == (len(DATASETS), len(DATASETS))
    # incidents B, then the lesson noting them, then the run events that mark the runs done
    assert catalog.batches == [
        ["incidentInfo"] * len(DATASETS),
        ["glossaryTermInfo"],
        ["assertionRunEvent"] * len(DATASETS),
    ]
    current_row_reads = [
        s for s in catalog.statements if s.startswith("SELECT urn, metadata, system_metadata")
    ]
    assert len(current_row_reads) == 3  # one a batch, not one an aspect
    assert catalog.statements.count("COMMIT") == 3  # one transaction a batch
    catalog.close()


def test_only_a_run_of_emits_is_merged() -> None:
    """Aspects decided one after another become one write; a lesson's save between them, or
    a single one, is left as it was."""
    a, b = (
        acting_as(REFLEX, DATASETS[n], StructuredPropertiesClass(properties=[])) for n in (0, 1)
    )
    out = Outbox()
    out.emit(a)
    mark = out.mark()
    out.emit(a)
    out.emit(b)
    _in_one_write(out, mark)
    assert out.directives == [Emit((a,)), Emit((a, b))]

    saved = lesson(urn=SWEPT, control=FRESHNESS, state=LessonState.PUBLISHED)
    out = Outbox()
    out.emit(a)
    out.save_lesson(saved)
    out.emit(b)
    before = list(out.directives)
    _in_one_write(out, 0)
    assert out.directives == before and isinstance(before[1], SaveLesson)
    out = Outbox()
    out.emit(a)
    _in_one_write(out, 0)
    assert out.directives == [Emit((a,))]
