"""ServerCatalog at the HTTP edge: a real ``DataHubGraph`` talking to a FAKE GMS.

No DataHub server can run here, so ``FakeGmsServer`` answers the HTTP calls DataHubGraph makes,
in GMS's shapes, and records them. What is tested for real is everything on the client side:
which endpoints are called, what the search filters name, what is written, and how answers and
failures are read. The last class runs the same calls against a real server when one is given.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from datahub.emitter.mce_builder import make_dataset_urn, make_domain_urn, make_user_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper as MCP
from datahub.emitter.serialization_helper import pre_json_transform
from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub.metadata.schema_classes import (
    AuditStampClass,
    CorpUserStatusClass,
    DatasetKeyClass,
    DatasetPropertiesClass,
    DomainsClass,
    GlobalTagsClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    NumberTypeClass,
    OwnerClass,
    OwnershipClass,
    OwnershipTypeClass,
    SchemaMetadataClass,
    StringTypeClass,
    SubTypesClass,
    TagAssociationClass,
    UpstreamClass,
    UpstreamLineageClass,
)

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.server import DOWNSTREAM_OF, ServerCatalog
from reflex_actions.catalog.translate import DATASET_ASPECTS
from tests.catalog.builders import field, schema
from tests.catalog.fake_gms import FakeGmsServer

T = TypeVar("T")

PAYMENTS = make_dataset_urn("snowflake", "finance.payments")
LEDGER = make_dataset_urn("snowflake", "finance.ledger")
RAW_ORDERS = make_dataset_urn("snowflake", "raw.orders")
SESSIONS = make_dataset_urn("postgres", "web.sessions")
OLD_PAYMENTS = make_dataset_urn("snowflake", "finance.old_payments")
FINANCE = make_domain_urn("finance")
BOB = make_user_urn("bob")
CAROL = make_user_urn("carol")
STAMP = AuditStampClass(0, "urn:li:corpuser:datahub")


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any attempt to open a network connection beyond 127.0.0.1 (telemetry, proxies...)."""
    connect = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in (
            "127.0.0.1",
            "::1",
        ):
            raise AssertionError(f"test tried to reach {address} beyond the loopback interface")
        connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def fake(loopback_only: None) -> Iterator[FakeGmsServer]:
    with FakeGmsServer() as server:
        yield server
    assert not server.unserved, (
        f"DataHubGraph called endpoints the fake does not model: {server.unserved}"
    )


def graph_for(fake: FakeGmsServer, **config: Any) -> DataHubGraph:
    return DataHubGraph(DatahubClientConfig(server=fake.url, **config))


@pytest.fixture
def catalog(fake: FakeGmsServer) -> Iterator[ServerCatalog]:
    store = ServerCatalog(graph_for(fake))
    yield store
    store.close()


class TestReads:
    def test_dataset_context_from_canned_aspects(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        v2_key = "[version=2.0].[type=string].transaction_id"
        for aspect in (
            DatasetKeyClass("urn:li:dataPlatform:snowflake", "finance.payments", "PROD"),
            DatasetPropertiesClass(name="Payments"),
            schema(
                field(v2_key, "VARCHAR", StringTypeClass()),
                field("amount", "DECIMAL(18,2)", NumberTypeClass()),
                keys=[v2_key],
            ),
            DomainsClass(domains=[FINANCE]),
            OwnershipClass(owners=[OwnerClass(BOB, OwnershipTypeClass.TECHNICAL_OWNER)]),
            SubTypesClass(typeNames=["Table"]),
            GlobalTagsClass(tags=[TagAssociationClass("urn:li:tag:pii")]),
            UpstreamLineageClass(upstreams=[UpstreamClass(RAW_ORDERS, "TRANSFORMED")]),
        ):
            fake.put_aspect(PAYMENTS, aspect)
        fake.add_edge(LEDGER, DOWNSTREAM_OF, PAYMENTS)
        fake.add_edge(PAYMENTS, DOWNSTREAM_OF, RAW_ORDERS)  # the other direction: not downstream

        payments = catalog.dataset(PAYMENTS)

        assert payments is not None
        assert (payments.name, payments.platform, payments.domain) == (
            "Payments",
            "snowflake",
            FINANCE,
        )
        assert [(f.name, f.type, f.native_type, f.is_key) for f in payments.fields] == [
            ("transaction_id", "string", "VARCHAR", True),
            ("amount", "number", "DECIMAL(18,2)", False),
        ]
        assert [(o.owner, o.ownership_type) for o in payments.owners] == [(BOB, "TECHNICAL_OWNER")]
        assert payments.sub_types == ("Table",)
        assert payments.tags == ("urn:li:tag:pii",)
        assert payments.upstreams == (RAW_ORDERS,)
        assert payments.downstreams == (LEDGER,)
        # all aspects in one entity read, projected to the ones Reflex uses
        (entity_read,) = fake.requests_to("/entitiesV2/")
        assert entity_read.path == f"/entitiesV2/{PAYMENTS}"
        projection = entity_read.query["aspects"][0].removeprefix("List(").rstrip(")")
        assert set(projection.split(",")) == set(DATASET_ASPECTS)
        # downstreams come from the server's graph index, not from reading other datasets
        relationship_reads = fake.requests_to("/openapi/relationships/v1/")
        assert relationship_reads[0].query == {
            "urn": [PAYMENTS],
            "direction": ["INCOMING"],
            "relationshipTypes": [DOWNSTREAM_OF],
            "start": ["0"],
        }
        assert len(fake.requests) == 1 + len(relationship_reads)

    def test_downstreams_follow_relationship_pages(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        children = [make_dataset_urn("snowflake", f"finance.child_{i:03}") for i in range(205)]
        for child in children:
            fake.add_edge(child, DOWNSTREAM_OF, PAYMENTS)

        assert catalog.downstreams(PAYMENTS) == sorted(children)
        starts = [r.query["start"] for r in fake.requests_to("/openapi/relationships/v1/")]
        assert starts == [["0"], ["200"], ["205"]]

    def test_incident_and_user_status_from_typed_aspects(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        incident = "urn:li:incident:dup-payments"
        fake.put_aspect(
            incident,
            IncidentInfoClass(
                type=IncidentTypeClass.OPERATIONAL,
                title="Duplicate payments",
                entities=[PAYMENTS],
                status=IncidentStatusClass(
                    state=IncidentStateClass.RESOLVED,
                    message="made the loader idempotent",
                    lastUpdated=AuditStampClass(0, CAROL),
                ),
                created=STAMP,
            ),
        )
        fake.put_aspect(BOB, CorpUserStatusClass(status="SUSPENDED", lastModified=STAMP))

        context = catalog.incident(incident)

        assert context is not None
        assert (context.title, context.state, context.resolution_note) == (
            "Duplicate payments",
            "RESOLVED",
            "made the loader idempotent",
        )
        assert (context.entities, context.last_updated_by) == ((PAYMENTS,), CAROL)
        assert catalog.user_status(BOB) == "SUSPENDED"
        assert [(r.path, r.query) for r in fake.requests_to("/aspects/")] == [
            (f"/aspects/{incident}", {"aspect": ["incidentInfo"], "version": ["0"]}),
            (f"/aspects/{BOB}", {"aspect": ["corpUserStatus"], "version": ["0"]}),
        ]

    def test_from_config_checks_it_reached_gms(self, fake: FakeGmsServer) -> None:
        store = ServerCatalog.from_config(fake.url)
        store.close()
        assert fake.requests_to("/config", "GET")


class TestCandidateLookups:
    """Each lookup is one search request whose filter names the index field and value."""

    @pytest.fixture(autouse=True)
    def documents(self, fake: FakeGmsServer) -> None:
        snowflake = ["urn:li:dataPlatform:snowflake"]
        fake.index(
            PAYMENTS,
            platform=snowflake,
            domains=[FINANCE],
            owners=[BOB],
            fieldPaths=["[version=2.0].[type=string].transaction_id", "amount"],
        )
        fake.index(
            LEDGER,
            platform=snowflake,
            domains=[FINANCE],
            owners=[CAROL],
            fieldPaths=["TRANSACTION_ID"],
        )
        fake.index(
            SESSIONS,
            platform=["urn:li:dataPlatform:postgres"],
            owners=[BOB],
            fieldPaths=["session_id", "previous_transaction_id"],
        )
        # soft-deleted: the default status filter keeps it out of every lookup
        fake.index(OLD_PAYMENTS, platform=snowflake, domains=[FINANCE], removed=["true"])

    @staticmethod
    def search_filters(fake: FakeGmsServer) -> list[list[dict[str, Any]]]:
        """The OR-of-AND filter clauses of the single search request made."""
        (search,) = fake.requests_to("/api/graphql", "POST")
        assert "scrollAcrossEntities" in search.body["query"]
        assert search.body["variables"]["types"] == ["DATASET"]
        return [clause["and"] for clause in search.body["variables"]["orFilters"]]

    @staticmethod
    def rule(field: str, value: str, condition: str = "EQUAL") -> dict[str, Any]:
        return {"field": field, "condition": condition, "values": [value]}

    def test_by_domain(self, fake: FakeGmsServer, catalog: ServerCatalog) -> None:
        assert catalog.datasets_by_domain(FINANCE) == sorted([LEDGER, PAYMENTS])
        (clause,) = self.search_filters(fake)
        assert self.rule("domains", FINANCE) in clause
        assert {"field": "removed", "condition": "EQUAL", "values": ["true"], "negated": True} in (
            clause
        )

    @pytest.mark.parametrize("platform", ["snowflake", "urn:li:dataPlatform:snowflake"])
    def test_by_platform(self, fake: FakeGmsServer, catalog: ServerCatalog, platform: str) -> None:
        assert catalog.datasets_by_platform(platform) == sorted([LEDGER, PAYMENTS])
        (clause,) = self.search_filters(fake)
        assert self.rule("platform.keyword", "urn:li:dataPlatform:snowflake") in clause

    def test_by_owner(self, fake: FakeGmsServer, catalog: ServerCatalog) -> None:
        assert catalog.datasets_by_owner(BOB) == sorted([PAYMENTS, SESSIONS])
        (clause,) = self.search_filters(fake)
        assert self.rule("owners", BOB) in clause

    def test_by_field_matches_simple_and_v2_paths_ignoring_case(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        assert catalog.datasets_by_field("transaction_id") == sorted([LEDGER, PAYMENTS])
        exact, v2 = self.search_filters(fake)
        assert self.rule("fieldPaths", "transaction_id", "IEQUAL") in exact
        assert self.rule("fieldPaths", "].transaction_id", "END_WITH") in v2

    def test_no_match_is_empty(self, fake: FakeGmsServer, catalog: ServerCatalog) -> None:
        assert catalog.datasets_by_domain(make_domain_urn("marketing")) == []


class TestWrites:
    def test_emit_sends_one_ingest_batch_carrying_each_aspect(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        owned = OwnershipClass(owners=[OwnerClass(CAROL, OwnershipTypeClass.DATA_STEWARD)])
        domain = DomainsClass(domains=[FINANCE])

        catalog.emit([MCP(entityUrn=PAYMENTS, aspect=owned), MCP(entityUrn=LEDGER, aspect=domain)])

        (batch,) = fake.requests_to("/aspects", "POST")
        assert batch.query == {"action": ["ingestProposalBatch"]}
        proposals = batch.body["proposals"]
        assert [(p["entityUrn"], p["aspectName"], p["changeType"]) for p in proposals] == [
            (PAYMENTS, "ownership", "UPSERT"),
            (LEDGER, "domains", "UPSERT"),
        ]
        assert [json.loads(p["aspect"]["value"]) for p in proposals] == [
            pre_json_transform(owned.to_obj()),
            pre_json_transform(domain.to_obj()),
        ]
        assert batch.body["async"] == "false"  # the write is durable before emit returns
        assert catalog.get_aspect(PAYMENTS, OwnershipClass) == owned

    def test_structured_properties_are_set_with_a_patch(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        """A patch lets GMS merge the change: no read-modify-write race with a steward."""
        prop = "urn:li:structuredProperty:reflex.approval"
        for mcp in bootstrap_mcps():  # GMS refuses values of a property it has no definition of
            fake.put_aspect(mcp.entityUrn, mcp.aspect)
        catalog.set_structured_properties(PAYMENTS, {prop: ["PENDING"]}, CAROL)

        (request,) = fake.requests_to("/aspects", "POST")
        assert request.query == {"action": ["ingestProposal"]}
        proposal = request.body["proposal"]
        assert (proposal["entityUrn"], proposal["aspectName"], proposal["changeType"]) == (
            PAYMENTS,
            "structuredProperties",
            "PATCH",
        )
        operations = json.loads(proposal["aspect"]["value"])
        assert operations["patch"] == [
            {
                "op": "add",
                "path": f"/properties/{prop}/",
                "value": {"propertyUrn": prop, "values": [{"string": "PENDING"}]},
            }
        ]

    def test_add_owner_is_a_patch(self, fake: FakeGmsServer, catalog: ServerCatalog) -> None:
        catalog.add_owner(PAYMENTS, CAROL, "TECHNICAL_OWNER", CAROL)

        (request,) = fake.requests_to("/aspects", "POST")
        proposal = request.body["proposal"]
        assert (proposal["aspectName"], proposal["changeType"]) == ("ownership", "PATCH")
        (operation,) = json.loads(proposal["aspect"]["value"])["patch"]
        assert operation["op"] == "add"
        assert operation["value"]["owner"] == CAROL
        assert operation["value"]["type"] == "TECHNICAL_OWNER"

    def test_emit_nothing_sends_nothing(self, fake: FakeGmsServer, catalog: ServerCatalog) -> None:
        catalog.emit([])
        assert fake.requests == []


class TestMissing:
    def test_unknown_entity_is_none(self, catalog: ServerCatalog) -> None:
        assert catalog.dataset(make_dataset_urn("snowflake", "nowhere.absent")) is None

    def test_entity_with_only_its_key_aspect_is_none(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        """GMS answers any urn with at least the key aspect: that alone is no dataset."""
        fake.put_aspect(PAYMENTS, DatasetKeyClass("urn:li:dataPlatform:snowflake", "x", "PROD"))
        assert catalog.dataset(PAYMENTS) is None
        assert not fake.requests_to("/openapi/relationships/v1/")

    def test_missing_aspects_and_edges(self, catalog: ServerCatalog) -> None:
        assert catalog.get_aspect(PAYMENTS, SchemaMetadataClass) is None
        assert catalog.incident("urn:li:incident:absent") is None
        assert catalog.user_status(CAROL) is None
        assert catalog.downstreams(PAYMENTS) == []


class TestServerErrors:
    """A failing server surfaces as CatalogError naming what was attempted."""

    @pytest.fixture
    def catalog(self, fake: FakeGmsServer) -> Iterator[ServerCatalog]:
        # by default DataHubGraph retries a 5xx 4 times with exponential backoff (~28 s)
        store = ServerCatalog(graph_for(fake, retry_max_times=0))
        yield store
        store.close()

    @pytest.mark.parametrize(
        ("prefix", "call", "names"),
        [
            ("/entitiesV2/", lambda c: c.dataset(PAYMENTS), f"read dataset {PAYMENTS}"),
            ("/aspects/", lambda c: c.incident("urn:li:incident:1"), "read incidentInfo of"),
            ("/aspects/", lambda c: c.user_status(BOB), f"read corpUserStatus of {BOB}"),
            ("/openapi/", lambda c: c.downstreams(PAYMENTS), "read the downstreams of"),
            ("/api/graphql", lambda c: c.datasets_by_field("x"), "search datasets by field x"),
            (
                "/aspects",
                lambda c: c.emit([MCP(entityUrn=PAYMENTS, aspect=DomainsClass([FINANCE]))]),
                f"write domains of {PAYMENTS}",
            ),
        ],
        ids=["dataset", "incident", "user_status", "downstreams", "search", "emit"],
    )
    def test_500_is_a_catalog_error(
        self,
        fake: FakeGmsServer,
        catalog: ServerCatalog,
        prefix: str,
        call: Callable[[ServerCatalog], object],
        names: str,
    ) -> None:
        fake.put_aspect(PAYMENTS, DatasetPropertiesClass(name="Payments"))  # reads reach the edge
        fake.fail(prefix, 500)
        with pytest.raises(CatalogError) as raised:
            call(catalog)
        message = str(raised.value)
        assert names in message
        assert fake.url in message
        assert "injected failure" in message  # the server's own message is kept

    def test_rejected_query_is_a_catalog_error(
        self, fake: FakeGmsServer, catalog: ServerCatalog
    ) -> None:
        """GMS reports a query it rejects as HTTP 200 with ``errors`` (e.g. an unknown operator)."""
        fake.reject_queries("Validation error: IEQUAL is not a FilterOperator")
        with pytest.raises(CatalogError, match=r"search datasets by field x.*IEQUAL is not"):
            catalog.datasets_by_field("x")

    def test_unreachable_server_is_a_catalog_error(self, loopback_only: None) -> None:
        with socket.socket() as placeholder:  # a port nobody listens on once it is closed
            placeholder.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{placeholder.getsockname()[1]}"
        store = ServerCatalog(DataHubGraph(DatahubClientConfig(server=url, retry_max_times=0)))
        with pytest.raises(CatalogError, match=f"cannot read dataset .*{re.escape(url)}"):
            store.dataset(PAYMENTS)


def eventually(read: Callable[[], T], expected: T, seconds: float = 30.0) -> T:
    """A real server's search and graph indexes lag its writes."""
    deadline = time.monotonic() + seconds
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(1)
    return value


@pytest.mark.skipif(
    not os.environ.get("DATAHUB_GMS_URL"),
    reason="no DataHub server: set DATAHUB_GMS_URL to run against a real GMS",
)
class TestAgainstRealServer:
    """Smoke test on a real GMS; urns carry a random suffix and are hard-deleted afterwards."""

    @pytest.fixture
    def live(self) -> Iterator[tuple[ServerCatalog, list[str]]]:
        store = ServerCatalog.from_config(
            os.environ["DATAHUB_GMS_URL"], os.environ.get("DATAHUB_GMS_TOKEN")
        )
        written: list[str] = []
        yield store, written
        for urn in written:
            store._graph.delete_entity(urn, hard=True)
        store.close()

    def test_round_trip(self, live: tuple[ServerCatalog, list[str]]) -> None:
        store, written = live
        suffix = uuid.uuid4().hex[:8]
        upstream = make_dataset_urn("snowflake", f"reflex_smoke_{suffix}.payments")
        downstream = make_dataset_urn("snowflake", f"reflex_smoke_{suffix}.ledger")
        owner = make_user_urn(f"reflex-smoke-{suffix}")
        written += [upstream, downstream]
        store.emit(
            [
                MCP(
                    entityUrn=upstream,
                    aspect=schema(field(f"txn_{suffix}", "VARCHAR", StringTypeClass(), key=True)),
                ),
                MCP(
                    entityUrn=upstream,
                    aspect=OwnershipClass(
                        owners=[OwnerClass(owner, OwnershipTypeClass.TECHNICAL_OWNER)]
                    ),
                ),
                MCP(
                    entityUrn=downstream,
                    aspect=UpstreamLineageClass(upstreams=[UpstreamClass(upstream, "TRANSFORMED")]),
                ),
            ]
        )

        context = store.dataset(upstream)
        assert context is not None
        key = context.field(f"txn_{suffix}")
        assert key is not None and key.is_key
        assert [o.owner for o in context.owners] == [owner]
        assert eventually(lambda: store.downstreams(upstream), [downstream]) == [downstream]
        assert eventually(lambda: store.datasets_by_owner(owner), [upstream]) == [upstream]
        assert eventually(lambda: store.datasets_by_field(f"TXN_{suffix}"), [upstream]) == [
            upstream
        ]
        assert store.dataset(make_dataset_urn("snowflake", f"absent_{suffix}")) is None
