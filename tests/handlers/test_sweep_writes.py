"""What a schedule sweep's slice costs the embedded store: one transaction (its incidents B, the
lesson, its run events, in that order), each aspect's current rows read once (issue 26)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.config import ReflexConfig
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.directives import Emit, SaveLesson
from reflex_actions.handlers.lesson_store import load_lesson
from reflex_actions.handlers.scheduled import _in_one_write, on_schedule
from reflex_actions.times import now_ms
from reflex_actions.vocabulary import COVERAGE
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import REFLEX, published_on

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
    catalog.emit(
        [
            *published_on(SWEPT, FRESHNESS, DATASETS),
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


def test_a_slice_is_written_in_one_transaction_reading_each_aspects_rows_once(
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
    n = len(DATASETS)
    assert catalog.batches == [
        ["incidentInfo"] * n + ["glossaryTermInfo"] + ["assertionRunEvent"] * n
    ]
    current_row_reads = [
        s for s in catalog.statements if s.startswith("SELECT urn, metadata, system_metadata")
    ]
    assert len(current_row_reads) == 3  # one an aspect name, not one an aspect
    assert catalog.statements.count("COMMIT") == 1
    stored = LiteCatalog(tmp_path / "s.db", access="read")
    assert len(stored.recent_timeseries(
        assertion_urn(SWEPT, DATASETS[0]), AssertionRunEventClass, 5
    )) == 1  # fmt: skip
    noted = load_lesson(stored, SWEPT)
    assert noted is not None and len(noted.recurrences) == len(DATASETS)
    assert on_schedule(ctx, now_ms(), 3600).judged == 0  # judged once a slot
    catalog.close()
    stored.close()


def test_a_slice_that_decided_anything_else_writes_one_directive_each() -> None:
    """``_in_one_write`` merges only what it knows the order of: aspects decided, the
    lesson's save, the run events."""
    a = acting_as(REFLEX, DATASETS[0], StructuredPropertiesClass(properties=[]))
    ctx = HandlerContext(catalog=MemoryCatalog(), config=ReflexConfig())
    ctx.out.emit(a)
    mark = ctx.out.mark()
    ctx.out.set_properties(DATASETS[1], {COVERAGE: [SWEPT]})
    ctx.out.emit(a)
    before = list(ctx.out.directives)
    assert not _in_one_write(ctx, mark, None, [a])
    assert ctx.out.directives == before

    ctx.out.rollback(mark)
    ctx.out.emit(a)
    assert _in_one_write(ctx, mark, None, [a, a])
    assert ctx.out.directives == [Emit((a,)), Emit((a, a, a))]
    assert not isinstance(ctx.out.directives[-1], SaveLesson)


def test_a_slice_whose_write_fails_leaves_nothing_and_is_judged_again(tmp_path: Path) -> None:
    """One transaction: a failure writing the slice (a full disk, a crash) leaves none of it,
    and the next tick judges it all again, raising each incident B once."""
    import pytest

    from reflex_actions.catalog.base import CatalogError

    class FailsOnce(Counted):
        failed = False

        def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
            if not self.failed and any(m.aspectName == "assertionRunEvent" for m in mcps):
                self.failed = True
                mcps[-1].aspect.timestampMillis = "never"  # type: ignore[union-attr]
                return super().emit(mcps)  # the last run event cannot be written
            return super().emit(mcps)

    catalog = FailsOnce(tmp_path / "s.db")
    _estate(catalog)
    ctx = HandlerContext(catalog=catalog, config=ReflexConfig(store=tmp_path / "s.db"))
    with pytest.raises(CatalogError):
        on_schedule(ctx, now_ms(), 3600)
    stored = LiteCatalog(tmp_path / "s.db", access="read")
    assert stored.get_aspect(assertion_urn(SWEPT, DATASETS[0]), AssertionRunEventClass) is None
    assert not load_lesson(stored, SWEPT).recurrences  # type: ignore[union-attr]

    counts = on_schedule(ctx, now_ms(), 3600)

    assert (counts.judged, counts.failed) == (len(DATASETS), len(DATASETS))
    noted = load_lesson(stored, SWEPT)
    assert noted is not None and len(noted.recurrences) == len(DATASETS)
    catalog.close()
    stored.close()
