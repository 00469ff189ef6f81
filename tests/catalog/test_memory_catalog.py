"""The in-memory catalog double: what handler tests rely on beyond the conformance suite."""

from __future__ import annotations

import pytest
from datahub.emitter.mce_builder import make_dataset_urn, make_user_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper as MCP
from datahub.metadata.schema_classes import (
    AssertionResultClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    ChangeTypeClass,
    OwnerClass,
    OwnershipClass,
    OwnershipTypeClass,
)

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.steward import acting_as
from reflex_actions.vocabulary import APPROVAL
from tests.catalog.memory_catalog import MemoryCatalog

PAYMENTS = make_dataset_urn("snowflake", "db.payments")
BOB = make_user_urn("bob")
CAROL = make_user_urn("carol")
ASSERTION = "urn:li:assertion:payments-unique"


def owned_by(*owners: str) -> OwnershipClass:
    return OwnershipClass(
        owners=[OwnerClass(o, OwnershipTypeClass.TECHNICAL_OWNER) for o in owners]
    )


def run_event(at: int, result: str) -> MCP:
    return MCP(
        entityUrn=ASSERTION,
        aspect=AssertionRunEventClass(
            timestampMillis=at,
            runId=str(at),
            asserteeUrn=PAYMENTS,
            assertionUrn=ASSERTION,
            status=AssertionRunStatusClass.COMPLETE,
            result=AssertionResultClass(type=result),
        ),
    )


def test_callers_cannot_mutate_stored_state() -> None:
    catalog = MemoryCatalog()
    written = owned_by(BOB)
    catalog.emit([MCP(entityUrn=PAYMENTS, aspect=written)])
    written.owners.append(OwnerClass(CAROL, OwnershipTypeClass.TECHNICAL_OWNER))
    read = catalog.get_aspect(PAYMENTS, OwnershipClass)
    assert read is not None
    read.owners.clear()

    assert catalog.get_aspect(PAYMENTS, OwnershipClass) == owned_by(BOB)
    assert catalog.datasets_by_owner(CAROL) == []
    assert [w.aspect for w in catalog.writes] == [owned_by(BOB)]


def test_unchanged_writes_are_neither_stored_nor_logged() -> None:
    catalog = MemoryCatalog()
    catalog.emit([acting_as(BOB, PAYMENTS, owned_by(BOB))])
    catalog.emit([acting_as(CAROL, PAYMENTS, owned_by(BOB))])
    catalog.add_owner(PAYMENTS, BOB, OwnershipTypeClass.TECHNICAL_OWNER, CAROL)
    catalog.set_structured_properties(PAYMENTS, {APPROVAL: ["PENDING"]}, CAROL)
    catalog.set_structured_properties(PAYMENTS, {APPROVAL: ["PENDING"]}, CAROL)

    assert [
        (w.aspectName, w.systemMetadata and w.systemMetadata.properties) for w in catalog.writes
    ] == [
        ("ownership", {"actor": BOB}),
        ("structuredProperties", {"actor": CAROL}),
    ]
    # the unchanged rewrite by carol did not become the recorded writer
    assert catalog.aspect_writer(PAYMENTS, OwnershipClass) == BOB


def test_latest_timeseries_is_the_newest_event_not_the_last_written() -> None:
    catalog = MemoryCatalog()
    catalog.emit([run_event(2_000, "FAILURE"), run_event(1_000, "SUCCESS")])
    catalog.emit([run_event(2_000, "FAILURE")])  # redelivered

    latest = catalog.latest_timeseries(ASSERTION, AssertionRunEventClass)
    assert latest is not None
    assert (latest.timestampMillis, latest.result and latest.result.type) == (2_000, "FAILURE")
    assert len(catalog.writes) == 2


def test_a_batch_with_a_proposal_it_cannot_store_changes_nothing() -> None:
    catalog = MemoryCatalog()
    delete = MCP(
        entityUrn=PAYMENTS, aspectName="ownership", aspect=None, changeType=ChangeTypeClass.DELETE
    )
    with pytest.raises(CatalogError, match="cannot write 'ownership' on"):
        catalog.emit([MCP(entityUrn=PAYMENTS, aspect=owned_by(BOB)), delete])

    assert catalog.get_aspect(PAYMENTS, OwnershipClass) is None
    assert catalog.writes == []
