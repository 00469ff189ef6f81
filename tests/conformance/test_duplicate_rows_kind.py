"""The duplicate-rows kind passes the lesson-kind conformance suite."""

from __future__ import annotations

from typing import ClassVar

from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.lessons.model import IncidentText
from reflex_actions.similarity import SimilarityQuery
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from tests.conformance.control_cases import UNIQUENESS

FINANCE = "urn:li:domain:finance"


def dataset(name: str, field: str) -> DatasetContext:
    return DatasetContext(
        urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
        name=name,
        platform="snowflake",
        domain=FINANCE,
        fields=(FieldInfo(name=field, native_type="VARCHAR", type="string", is_key=True),),
    )


class TestDuplicateRowsKind(BaseLessonKindConformance):
    kind_pattern = DUPLICATE_ROWS
    incident = IncidentText(
        urn="urn:li:incident:dup",
        title="Duplicate transactions in payments",
        description="The loader timed out, retried the batch and inserted 100 rows twice.",
    )
    control_case = UNIQUENESS
    renaming: ClassVar[dict[str, str] | None] = {"transaction_id": "txn_id"}

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        source = dataset("payments", "transaction_id")
        catalog = InMemoryCatalog(
            [source, dataset("ledger", "transaction_id"), dataset("fx", "rate")]
        )
        query = SimilarityQuery(
            pattern=DUPLICATE_ROWS,
            control=self.control(),
            source_urn=source.urn,
        )
        return catalog, query
