"""The orphaned-ownership kind passes the lesson-kind conformance suite."""

from __future__ import annotations

from reflex_actions.catalog.models import DatasetContext, OwnerInfo
from reflex_actions.kinds.orphaned_ownership import ORPHANED_OWNERSHIP
from reflex_actions.lessons.model import IncidentText
from reflex_actions.similarity import SimilarityQuery
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from tests.conformance.control_cases import ACTIVE_OWNERSHIP

BOB, CAROL, ERIN = (f"urn:li:corpuser:{n}" for n in ("bob", "carol", "erin"))


def dataset(name: str, *owners: str) -> DatasetContext:
    return DatasetContext(
        urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
        name=name,
        platform="snowflake",
        domain="urn:li:domain:finance",
        owners=tuple(OwnerInfo(owner=o, ownership_type="TECHNICAL_OWNER") for o in owners),
    )


class TestOrphanedOwnershipKind(BaseLessonKindConformance):
    kind_pattern = ORPHANED_OWNERSHIP
    incident = IncidentText(
        urn="urn:li:incident:owner",
        title="Nobody to page for finance.payments",
        description="Its only technical owner left the company and the account was suspended.",
    )
    control_case = ACTIVE_OWNERSHIP
    renaming = None

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        source = dataset("payments", BOB)
        estate = [source, dataset("revenue", BOB, ERIN), dataset("fx", ERIN), dataset("gl", CAROL)]
        catalog = InMemoryCatalog(estate, {BOB: "SUSPENDED", CAROL: "ACTIVE", ERIN: "ACTIVE"})
        query = SimilarityQuery(
            pattern=ORPHANED_OWNERSHIP,
            control=self.control(),
            source_urn=source.urn,
            departed_users=(BOB,),
        )
        return catalog, query
