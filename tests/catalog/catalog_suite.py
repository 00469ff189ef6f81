"""The catalog conformance suite (dbt-adapters style): every catalog store passes it.

A store's test module subclasses :class:`BaseCatalogConformance` and provides the ``catalog``
fixture (a store it opens and closes); every test below then runs against that store.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import pytest
from datahub.emitter.mce_builder import make_dataset_urn, make_domain_urn, make_user_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper as MCP
from datahub.metadata.schema_classes import (
    AssertionResultClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    AuditStampClass,
    CorpUserStatusClass,
    DomainsClass,
    GlobalTagsClass,
    GlossaryTermAssociationClass,
    GlossaryTermInfoClass,
    GlossaryTermsClass,
    GroupMembershipClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    NumberTypeClass,
    OwnerClass,
    OwnershipClass,
    OwnershipTypeClass,
    StringTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyDefinitionClass,
    SubTypesClass,
    TagAssociationClass,
    UpstreamClass,
    UpstreamLineageClass,
)

from reflex_actions.catalog.base import Catalog, Written
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.server import ServerCatalog
from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.catalog.builders import field, schema

T = TypeVar("T")
GMS_URL = os.environ.get("DATAHUB_GMS_URL")


def eventually(read: Callable[[], T], expected: T, seconds: float = 30.0) -> T:
    """A server's search index lags its writes; the embedded store answers at once."""
    deadline = time.monotonic() + (seconds if GMS_URL else 0)
    while True:
        value = read()
        if value == expected or time.monotonic() >= deadline:
            return value
        time.sleep(1)


class Estate:
    """A small estate: payments -> ledger, an unrelated marketing table."""

    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.payments = make_dataset_urn("snowflake", f"reflex_test_{suffix}.payments")
        self.ledger = make_dataset_urn("snowflake", f"reflex_test_{suffix}.ledger")
        self.sessions = make_dataset_urn("postgres", f"reflex_test_{suffix}.sessions")
        self.finance = make_domain_urn(f"reflex-test-finance-{suffix}")
        self.bob = make_user_urn(f"reflex-test-bob-{suffix}")
        self.carol = make_user_urn(f"reflex-test-carol-{suffix}")
        self.field = f"transaction_id_{suffix}"
        self.incident = f"urn:li:incident:reflex-test-{suffix}"

    def mcps(self) -> list[MCP]:
        owned = OwnershipClass(owners=[OwnerClass(self.bob, OwnershipTypeClass.TECHNICAL_OWNER)])
        return [
            MCP(
                entityUrn=self.payments,
                aspect=schema(
                    field(
                        f"[version=2.0].[type=string].{self.field}", "VARCHAR", StringTypeClass()
                    ),
                    field("amount", "DECIMAL(18,2)", NumberTypeClass()),
                    keys=[f"[version=2.0].[type=string].{self.field}"],
                ),
            ),
            MCP(entityUrn=self.payments, aspect=DomainsClass(domains=[self.finance])),
            MCP(entityUrn=self.payments, aspect=owned),
            MCP(entityUrn=self.payments, aspect=SubTypesClass(typeNames=["Table"])),
            MCP(
                entityUrn=self.payments,
                aspect=GlobalTagsClass(tags=[TagAssociationClass("urn:li:tag:pii")]),
            ),
            MCP(
                entityUrn=self.payments,
                aspect=GlossaryTermsClass(
                    terms=[GlossaryTermAssociationClass("urn:li:glossaryTerm:money")],
                    auditStamp=AuditStampClass(0, "urn:li:corpuser:datahub"),
                ),
            ),
            MCP(
                entityUrn=self.ledger,
                aspect=schema(field(self.field.upper(), "VARCHAR", StringTypeClass(), key=True)),
            ),
            MCP(entityUrn=self.ledger, aspect=DomainsClass(domains=[self.finance])),
            MCP(
                entityUrn=self.ledger,
                aspect=UpstreamLineageClass(
                    upstreams=[UpstreamClass(self.payments, "TRANSFORMED")]
                ),
            ),
            MCP(
                entityUrn=self.sessions,
                aspect=schema(field("session_id", "TEXT", StringTypeClass())),
            ),
            MCP(
                entityUrn=self.bob,
                aspect=CorpUserStatusClass(
                    status="SUSPENDED", lastModified=AuditStampClass(0, "urn:li:corpuser:datahub")
                ),
            ),
            MCP(
                entityUrn=self.incident,
                aspect=IncidentInfoClass(
                    type=IncidentTypeClass.OPERATIONAL,
                    title="Duplicate payments",
                    description="Retries double-inserted rows",
                    entities=[self.payments],
                    status=IncidentStatusClass(
                        state=IncidentStateClass.ACTIVE,
                        lastUpdated=AuditStampClass(0, "urn:li:corpuser:datahub"),
                    ),
                    created=AuditStampClass(0, "urn:li:corpuser:datahub"),
                ),
            ),
        ]


class BaseCatalogConformance:
    """What every catalog store gets right; subclass it with a ``catalog`` fixture."""

    @pytest.fixture
    def catalog(self) -> Iterator[Catalog]:
        raise NotImplementedError("a store's conformance class provides its catalog fixture")

    @pytest.fixture
    def estate(self, catalog: Catalog) -> Estate:
        built = Estate()
        catalog.emit(built.mcps())
        return built

    def test_dataset_context(self, catalog: Catalog, estate: Estate) -> None:
        payments = catalog.dataset(estate.payments)
        assert payments is not None
        assert payments.platform == "snowflake"
        assert payments.domain == estate.finance
        assert payments.sub_types == ("Table",)
        key = payments.field(estate.field)
        assert (
            key is not None and key.is_key and key.type == "string" and key.native_type == "VARCHAR"
        )
        amount = payments.field("amount")
        assert amount is not None and not amount.is_key and amount.type == "number"
        assert [(o.owner, o.ownership_type) for o in payments.owners] == [
            (estate.bob, "TECHNICAL_OWNER")
        ]
        assert payments.tags == ("urn:li:tag:pii",)
        assert payments.glossary_terms == ("urn:li:glossaryTerm:money",)
        assert eventually(lambda: catalog.downstreams(estate.payments), [estate.ledger]) == [
            estate.ledger
        ]
        ledger = catalog.dataset(estate.ledger)
        assert ledger is not None and ledger.upstreams == (estate.payments,)

    def test_candidate_lookups(self, catalog: Catalog, estate: Estate) -> None:
        both = sorted([estate.payments, estate.ledger])
        assert eventually(lambda: catalog.datasets_by_domain(estate.finance), both) == both
        # field names match case-insensitively on the simple path
        assert eventually(lambda: catalog.datasets_by_field(estate.field), both) == both
        assert eventually(lambda: catalog.datasets_by_owner(estate.bob), [estate.payments]) == [
            estate.payments
        ]
        assert estate.sessions in eventually(
            lambda: catalog.datasets_by_platform("postgres"), [estate.sessions]
        )
        assert estate.sessions not in catalog.datasets_by_platform("urn:li:dataPlatform:snowflake")

    def test_terms_under_a_node(self, catalog: Catalog) -> None:
        node = f"urn:li:glossaryNode:reflex.test-{uuid.uuid4().hex[:8]}"
        inside, outside = (f"urn:li:glossaryTerm:reflex.test-{uuid.uuid4().hex[:8]}" for _ in "ab")
        catalog.emit(
            [
                MCP(
                    entityUrn=inside,
                    aspect=GlossaryTermInfoClass(
                        definition="", termSource="INTERNAL", parentNode=node
                    ),
                ),
                MCP(
                    entityUrn=outside,
                    aspect=GlossaryTermInfoClass(definition="", termSource="INTERNAL"),
                ),
            ]
        )
        assert eventually(lambda: catalog.terms_under(node), [inside]) == [inside]
        assert outside not in catalog.terms_under(node)

    def test_lookups_follow_updates(self, catalog: Catalog, estate: Estate) -> None:
        assert eventually(lambda: catalog.datasets_by_owner(estate.bob), [estate.payments])
        catalog.emit(
            [
                MCP(
                    entityUrn=estate.payments,
                    aspect=OwnershipClass(
                        owners=[OwnerClass(estate.carol, OwnershipTypeClass.TECHNICAL_OWNER)]
                    ),
                )
            ]
        )
        assert eventually(lambda: catalog.datasets_by_owner(estate.bob), []) == []
        assert eventually(lambda: catalog.datasets_by_owner(estate.carol), [estate.payments]) == [
            estate.payments
        ]

    def test_missing_things_read_as_none_or_empty(self, catalog: Catalog, estate: Estate) -> None:
        absent = make_dataset_urn("snowflake", f"absent_{uuid.uuid4().hex}")
        assert catalog.dataset(absent) is None
        assert catalog.get_aspect(estate.payments, IncidentInfoClass) is None
        assert catalog.incident("urn:li:incident:absent-" + uuid.uuid4().hex) is None
        assert catalog.user_status(estate.carol) is None
        assert catalog.user_status(estate.bob) == "SUSPENDED"
        assert catalog.downstreams(absent) == []
        assert catalog.datasets_by_field("no_such_field_" + uuid.uuid4().hex) == []

    def test_incident_and_steward_resolution(self, catalog: Catalog, estate: Estate) -> None:
        before = catalog.incident(estate.incident)
        assert (
            before is not None
            and before.state == "ACTIVE"
            and before.entities == (estate.payments,)
        )
        resolve_incident(catalog, estate.incident, "made the loader idempotent", estate.carol)
        after = catalog.incident(estate.incident)
        assert after is not None
        assert (after.state, after.resolution_note) == ("RESOLVED", "made the loader idempotent")
        assert after.last_updated_by == estate.carol
        assert after.title == "Duplicate payments"

    def test_structured_property_edits_keep_other_properties(
        self, catalog: Catalog, estate: Estate
    ) -> None:
        term = f"urn:li:glossaryTerm:reflex.lessons.test-{uuid.uuid4().hex[:8]}"
        catalog.emit(bootstrap_mcps())
        catalog.set_structured_properties(term, {ROOT_CAUSE_STATUS: ["PROPOSED"]}, estate.carol)
        catalog.set_structured_properties(term, {APPROVAL: ["PENDING"]}, estate.carol)
        catalog.set_structured_properties(term, {ROOT_CAUSE_STATUS: ["CONFIRMED"]}, estate.carol)
        properties = catalog.get_aspect(term, StructuredPropertiesClass)
        assert properties is not None
        values = {p.propertyUrn: p.values for p in properties.properties}
        assert values == {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["PENDING"]}

    def test_setting_no_values_removes_a_property_and_keeps_the_others(
        self, catalog: Catalog, estate: Estate
    ) -> None:
        term = f"urn:li:glossaryTerm:reflex.lessons.test-{uuid.uuid4().hex[:8]}"
        catalog.emit(bootstrap_mcps())
        both = {ROOT_CAUSE_STATUS: ["PROPOSED"], APPROVAL: ["PENDING"]}
        catalog.set_structured_properties(term, both, estate.carol)
        catalog.set_structured_properties(term, {APPROVAL: []}, estate.carol)
        catalog.set_structured_properties(term, {APPROVAL: []}, estate.carol)  # already gone
        properties = catalog.get_aspect(term, StructuredPropertiesClass)
        assert properties is not None
        values = {p.propertyUrn: p.values for p in properties.properties}
        assert values == {ROOT_CAUSE_STATUS: ["PROPOSED"]}

    def test_bootstrap_is_readable_and_idempotent(self, catalog: Catalog) -> None:
        catalog.emit(bootstrap_mcps())
        catalog.emit(bootstrap_mcps())
        definition = catalog.get_aspect(ROOT_CAUSE_STATUS, StructuredPropertyDefinitionClass)
        assert definition is not None
        assert definition.qualifiedName == "reflex.rootCauseStatus"
        assert [v.value for v in definition.allowedValues or []] == [
            "PROPOSED",
            "CONFIRMED",
            "REJECTED",
        ]

    def test_add_owner_keeps_the_others_and_is_idempotent(
        self, catalog: Catalog, estate: Estate
    ) -> None:
        catalog.add_owner(estate.payments, estate.carol, "TECHNICAL_OWNER", estate.carol)
        catalog.add_owner(estate.payments, estate.carol, "TECHNICAL_OWNER", estate.carol)
        payments = catalog.dataset(estate.payments)
        assert payments is not None
        assert sorted((o.owner, o.ownership_type) for o in payments.owners) == sorted(
            [(estate.bob, "TECHNICAL_OWNER"), (estate.carol, "TECHNICAL_OWNER")]
        )
        assert eventually(lambda: catalog.datasets_by_owner(estate.carol), [estate.payments]) == [
            estate.payments
        ]

    def test_latest_timeseries_value(self, catalog: Catalog, estate: Estate) -> None:
        assertion = f"urn:li:assertion:reflex-test-{uuid.uuid4().hex[:8]}"
        run = partial(_run_event, assertion, estate.payments)
        runs = [(1_000, "SUCCESS"), (2_000, "FAILURE")]

        assert catalog.latest_timeseries(assertion, AssertionRunEventClass) is None
        catalog.emit([MCP(entityUrn=assertion, aspect=run(at, result)) for at, result in runs])
        latest = eventually(
            lambda: catalog.latest_timeseries(assertion, AssertionRunEventClass) is not None, True
        ) and catalog.latest_timeseries(assertion, AssertionRunEventClass)
        assert latest is not None
        assert (latest.timestampMillis, latest.result.type) == (2_000, "FAILURE")

    def test_timeseries_values_come_newest_first_with_their_writers(
        self, catalog: Catalog, estate: Estate
    ) -> None:
        """Reflex reads its own run events apart from anyone else's: the embedded store names
        each one's writer; GMS's timeseries index keeps none (Reflex seals its own instead)."""
        assertion = f"urn:li:assertion:reflex-test-{uuid.uuid4().hex[:8]}"
        run = partial(_run_event, assertion, estate.payments)
        catalog.emit([acting_as(estate.carol, assertion, run(at, "SUCCESS")) for at in (1, 2, 3)])

        written = eventually(
            lambda: [w.aspect.timestampMillis for w in read(catalog, assertion, limit=2)],
            [3, 2],
        )
        assert written == [3, 2]
        recorded = None if isinstance(catalog, ServerCatalog) else estate.carol
        assert {w.writer for w in read(catalog, assertion, limit=5)} == {recorded}
        one = read(catalog, assertion, limit=5, where={"runId": "2"})
        assert [w.aspect.runId for w in one] == ["2"]

    def test_aspect_writer_is_who_the_store_recorded(
        self, catalog: Catalog, estate: Estate
    ) -> None:
        """Who wrote an aspect (the gates trust a group membership only when the member did not
        write it): the acting user on the embedded store, the authenticated principal on GMS."""
        member = make_user_urn(f"member-{uuid.uuid4().hex[:8]}")
        membership = GroupMembershipClass(groups=["urn:li:corpGroup:finance-stewards"])
        assert catalog.aspect_writer(member, GroupMembershipClass) is None
        catalog.emit([acting_as(estate.carol, member, membership)])
        recorded = catalog.principal() if isinstance(catalog, ServerCatalog) else estate.carol
        assert catalog.aspect_writer(member, GroupMembershipClass) == recorded


def read(catalog: Catalog, urn: str, **options: Any) -> list[Written[AssertionRunEventClass]]:
    return catalog.timeseries_written(urn, AssertionRunEventClass, **options)


def _run_event(assertion: str, dataset: str, at: int, result: str) -> AssertionRunEventClass:
    return AssertionRunEventClass(
        timestampMillis=at,
        runId=str(at),
        asserteeUrn=dataset,
        assertionUrn=assertion,
        status=AssertionRunStatusClass.COMPLETE,
        result=AssertionResultClass(type=result),
    )
