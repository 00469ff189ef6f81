"""The FAKE GMS is as strict as GMS where Reflex depends on it: patches, validation, timeseries
reads and the change log. Driven through ``ServerCatalog`` and a real ``DataHubGraph``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from datahub.emitter.mce_builder import make_dataset_urn, make_user_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper as MCP
from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub.metadata.schema_classes import (
    AssertionResultClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    DomainsClass,
    OwnerClass,
    OwnershipClass,
    OwnershipTypeClass,
    PropertyValueClass,
    StructuredPropertiesClass,
    StructuredPropertyDefinitionClass,
    StructuredPropertyValueAssignmentClass,
)

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.server import ServerCatalog
from reflex_actions.vocabulary import APPROVAL, COVERAGE, PROPOSED_OWNER, ROOT_CAUSE_STATUS, SCOPE
from tests.catalog.fake_gms import SYSTEM_ACTOR, FakeGmsServer
from tests.catalog.gms_patch import PatchError, apply_patch

PAYMENTS = make_dataset_urn("snowflake", "finance.payments")
LEDGER = make_dataset_urn("snowflake", "finance.ledger")
TERM = "urn:li:glossaryTerm:reflex.lessons.dup-payments"
BOB, CAROL = make_user_urn("bob"), make_user_urn("carol")
REFLEX = "urn:li:corpuser:datahub-reflex"
TOKENS = {"reflex-token": REFLEX, "carol-token": CAROL}


@pytest.fixture
def fake() -> Iterator[FakeGmsServer]:
    with FakeGmsServer(tokens=TOKENS, metadata_service_auth=True) as server:
        for mcp in bootstrap_mcps():
            server.put_aspect(mcp.entityUrn, mcp.aspect)  # type: ignore[arg-type]
        yield server
    assert not server.unserved, f"calls the fake does not model: {server.unserved}"


def connect(fake: FakeGmsServer, token: str | None = None) -> ServerCatalog:
    graph = DataHubGraph(DatahubClientConfig(server=fake.url, token=token, retry_max_times=0))
    return ServerCatalog(graph, owns_graph=True)


@pytest.fixture
def reflex(fake: FakeGmsServer) -> Iterator[ServerCatalog]:
    store = connect(fake, "reflex-token")
    yield store
    store.close()


def values_of(catalog: ServerCatalog, urn: str) -> dict[str, list[Any]]:
    properties = catalog.get_aspect(urn, StructuredPropertiesClass)
    return {p.propertyUrn: list(p.values) for p in properties.properties} if properties else {}


class TestPatches:
    def test_structured_property_patches_merge_by_property_urn(self, reflex: ServerCatalog) -> None:
        reflex.set_structured_properties(TERM, {ROOT_CAUSE_STATUS: ["PROPOSED"]}, REFLEX)
        reflex.set_structured_properties(TERM, {APPROVAL: ["PENDING"], SCOPE: [PAYMENTS]}, REFLEX)
        reflex.set_structured_properties(TERM, {ROOT_CAUSE_STATUS: ["CONFIRMED"]}, REFLEX)

        assert values_of(reflex, TERM) == {
            ROOT_CAUSE_STATUS: ["CONFIRMED"],
            APPROVAL: ["PENDING"],
            SCOPE: [PAYMENTS],
        }

    def test_owner_patches_are_keyed_by_owner_and_type(
        self, fake: FakeGmsServer, reflex: ServerCatalog
    ) -> None:
        fake.put_aspect(
            PAYMENTS, OwnershipClass(owners=[OwnerClass(BOB, OwnershipTypeClass.TECHNICAL_OWNER)])
        )
        reflex.add_owner(PAYMENTS, CAROL, "TECHNICAL_OWNER", REFLEX)
        reflex.add_owner(PAYMENTS, CAROL, "TECHNICAL_OWNER", REFLEX)  # the same key: no copy
        reflex.add_owner(PAYMENTS, CAROL, "DATA_STEWARD", REFLEX)  # another type: another owner

        ownership = reflex.get_aspect(PAYMENTS, OwnershipClass)
        assert ownership is not None
        assert sorted((o.owner, o.type) for o in ownership.owners) == [
            (BOB, "TECHNICAL_OWNER"),
            (CAROL, "DATA_STEWARD"),
            (CAROL, "TECHNICAL_OWNER"),
        ]

    def test_remove_operations_drop_only_their_key(self) -> None:
        current = {
            "properties": [
                {"propertyUrn": APPROVAL, "values": [{"string": "PENDING"}]},
                {"propertyUrn": SCOPE, "values": [{"string": PAYMENTS}]},
            ]
        }
        body = {
            "arrayPrimaryKeys": {"properties": ["propertyUrn"]},
            "patch": [{"op": "remove", "path": f"/properties/{SCOPE}"}],
        }
        assert apply_patch("structuredProperties", current, body) == {
            "properties": [{"propertyUrn": APPROVAL, "values": [{"string": "PENDING"}]}]
        }

    def test_a_key_only_in_the_path_is_put_back_and_a_bare_list_uses_the_template(self) -> None:
        """GMS re-injects a scalar key that lived only in the path; a patch that is a bare
        operation list is keyed by the aspect's template (owner, type, typeUrn for owners)."""
        patched = apply_patch(
            "ownership",
            None,
            [{"op": "add", "path": f"/owners/{CAROL}/DATA_STEWARD/", "value": {"type": "X"}}],
        )
        assert patched["owners"] == [{"owner": CAROL, "type": "X"}]

    @pytest.mark.parametrize(
        "body",
        [
            [{"op": "move", "path": "/owners", "value": []}],
            {"no": "patch"},
            [{"op": "replace", "path": "/nowhere", "value": 1}],
        ],
        ids=["unsupported-op", "not-a-patch", "replace-missing"],
    )
    def test_bad_patches_are_refused(self, body: Any) -> None:
        with pytest.raises(PatchError):
            apply_patch("ownership", None, body)


class TestStructuredPropertyValidation:
    """GMS refuses a value its definition does not allow; nothing is written, nothing logged."""

    @pytest.mark.parametrize(
        ("values", "problem"),
        [
            ({"urn:li:structuredProperty:reflex.unknown": ["x"]}, "Structured Property Definition"),
            ({APPROVAL: ["PENDING", "APPROVED"]}, "has cardinality 1"),
            ({APPROVAL: ["MAYBE"]}, "should be one of"),
            ({APPROVAL: [3.0]}, "should be a string"),
            ({SCOPE: ["not-an-urn"]}, "should be an urn"),
            ({SCOPE: [BOB]}, "not of an allowed entity type"),
            ({COVERAGE: [PAYMENTS]}, "not of an allowed entity type"),
        ],
        ids=["undefined", "cardinality", "allowed-values", "type", "urn", "urn-type", "coverage"],
    )
    def test_invalid_values_are_refused(
        self,
        fake: FakeGmsServer,
        reflex: ServerCatalog,
        values: dict[str, list[str | float]],
        problem: str,
    ) -> None:
        reflex.set_structured_properties(TERM, {ROOT_CAUSE_STATUS: ["PROPOSED"]}, REFLEX)
        fake.take_change_log()

        with pytest.raises(CatalogError, match=f"set structured properties on .*{problem}"):
            reflex.set_structured_properties(TERM, values, REFLEX)

        assert values_of(reflex, TERM) == {ROOT_CAUSE_STATUS: ["PROPOSED"]}
        assert fake.take_change_log() == []

    def test_number_and_date_types(self, fake: FakeGmsServer, reflex: ServerCatalog) -> None:
        for urn, value_type in (("n", "number"), ("d", "date")):
            fake.put_aspect(
                f"urn:li:structuredProperty:{urn}",
                StructuredPropertyDefinitionClass(
                    qualifiedName=urn,
                    valueType=f"urn:li:dataType:datahub.{value_type}",
                    entityTypes=["urn:li:entityType:datahub.dataset"],
                    allowedValues=[PropertyValueClass(value=1.5)] if urn == "n" else None,
                ),
            )
        number, date = "urn:li:structuredProperty:n", "urn:li:structuredProperty:d"
        reflex.set_structured_properties(PAYMENTS, {number: [1.5], date: ["2024-05-01"]}, REFLEX)
        with pytest.raises(CatalogError, match="should be a number"):
            reflex.set_structured_properties(PAYMENTS, {number: ["1.5"]}, REFLEX)
        with pytest.raises(CatalogError, match="should be a date with format YYYY-MM-DD"):
            reflex.set_structured_properties(PAYMENTS, {date: ["May 1st"]}, REFLEX)
        assert values_of(reflex, PAYMENTS) == {number: [1.5], date: ["2024-05-01"]}

    def test_a_batch_with_one_invalid_proposal_writes_nothing(
        self, fake: FakeGmsServer, reflex: ServerCatalog
    ) -> None:
        invalid = StructuredPropertiesClass(
            properties=[StructuredPropertyValueAssignmentClass(PROPOSED_OWNER, [PAYMENTS])]
        )
        with pytest.raises(CatalogError, match="not of an allowed entity type"):
            reflex.emit(
                [
                    MCP(entityUrn=LEDGER, aspect=DomainsClass(domains=["urn:li:domain:f"])),
                    MCP(entityUrn=PAYMENTS, aspect=invalid),
                ]
            )
        assert reflex.get_aspect(LEDGER, DomainsClass) is None
        assert fake.change_log == []


def run_event(at: int, result: str) -> MCP:
    assertion = "urn:li:assertion:a1"
    return MCP(
        entityUrn=assertion,
        aspect=AssertionRunEventClass(
            timestampMillis=at,
            runId=str(at),
            asserteeUrn=PAYMENTS,
            assertionUrn=assertion,
            status=AssertionRunStatusClass.COMPLETE,
            result=AssertionResultClass(type=result),
        ),
    )


class TestTimeseries:
    def test_latest_run_event_is_the_newest_by_timestamp(
        self, fake: FakeGmsServer, reflex: ServerCatalog
    ) -> None:
        assert reflex.latest_timeseries("urn:li:assertion:a1", AssertionRunEventClass) is None
        reflex.emit([run_event(2_000, "FAILURE"), run_event(3_000, "SUCCESS")])
        reflex.emit([run_event(1_000, "SUCCESS")])  # an older run, written last

        latest = reflex.latest_timeseries("urn:li:assertion:a1", AssertionRunEventClass)

        assert latest is not None and latest.result is not None
        assert (latest.timestampMillis, latest.result.type) == (3_000, "SUCCESS")
        reads = fake.requests_to("/aspects", "POST")
        read = [r for r in reads if r.query == {"action": ["getTimeseriesAspectValues"]}][-1]
        assert (read.body["aspect"], read.body["limit"]) == ("assertionRunEvent", 1)
        # timeseries values are not versioned: their change logs carry no previous value
        logged = [m for m in fake.change_log if m.aspectName == "assertionRunEvent"]
        assert len(logged) == 3 and all(m.previousAspectValue is None for m in logged)


class TestChangeLog:
    def test_each_write_logs_the_aspect_its_previous_value_and_the_principal(
        self, fake: FakeGmsServer, reflex: ServerCatalog
    ) -> None:
        first = DomainsClass(domains=["urn:li:domain:finance"])
        second = DomainsClass(domains=["urn:li:domain:sales"])
        reflex.emit([MCP(entityUrn=PAYMENTS, aspect=first)])
        reflex.emit([MCP(entityUrn=PAYMENTS, aspect=first)])  # unchanged: GMS logs nothing
        reflex.emit([MCP(entityUrn=PAYMENTS, aspect=second)])

        created, changed = fake.take_change_log()
        assert (created.entityType, created.entityUrn, created.aspectName) == (
            "dataset",
            PAYMENTS,
            "domains",
        )
        assert created.previousAspectValue is None
        assert created.aspect is not None and changed.aspect is not None
        assert changed.previousAspectValue is not None
        assert json.loads(created.aspect.value) == first.to_obj()
        assert json.loads(changed.previousAspectValue.value) == first.to_obj()
        assert json.loads(changed.aspect.value) == second.to_obj()
        assert [m.created.actor for m in (created, changed)] == [REFLEX, REFLEX]

    def test_a_patch_logs_the_merged_aspect_as_the_token_principal(
        self, fake: FakeGmsServer, reflex: ServerCatalog
    ) -> None:
        reflex.set_structured_properties(TERM, {ROOT_CAUSE_STATUS: ["PROPOSED"]}, REFLEX)
        steward = connect(fake, "carol-token")
        steward.set_structured_properties(TERM, {ROOT_CAUSE_STATUS: ["CONFIRMED"]}, CAROL)
        steward.close()

        drafted, confirmed = fake.take_change_log()

        assert (drafted.created.actor, confirmed.created.actor) == (REFLEX, CAROL)
        assert confirmed.changeType == "UPSERT"
        assert confirmed.aspect is not None and confirmed.previousAspectValue is not None
        after = StructuredPropertiesClass.from_obj(json.loads(confirmed.aspect.value))
        before = StructuredPropertiesClass.from_obj(json.loads(confirmed.previousAspectValue.value))
        assert [(p.propertyUrn, p.values) for p in after.properties] == [
            (ROOT_CAUSE_STATUS, ["CONFIRMED"])
        ]
        assert [(p.propertyUrn, p.values) for p in before.properties] == [
            (ROOT_CAUSE_STATUS, ["PROPOSED"])
        ]

    def test_with_auth_on_a_caller_without_a_known_token_is_refused(
        self, fake: FakeGmsServer
    ) -> None:
        anonymous, stranger = connect(fake), connect(fake, "stolen-token")
        for caller in (anonymous, stranger):
            with pytest.raises(CatalogError, match="Unauthorized"):
                caller.emit([MCP(entityUrn=LEDGER, aspect=DomainsClass(domains=[]))])
            caller.close()
        assert fake.take_change_log() == []


def test_with_auth_off_gms_records_the_actor_a_caller_names_and_ignores_tokens() -> None:
    """DataHub's ``NoOpAuthenticator``: no credential is checked; the ``X-DataHub-Actor``
    header (the frontend's session user) names the actor, else the system actor."""
    with FakeGmsServer(tokens=TOKENS) as fake:
        claims = DataHubGraph(
            DatahubClientConfig(
                server=fake.url,
                retry_max_times=0,
                extra_headers={"X-DataHub-Actor": "urn:li:corpuser:mallory"},
            )
        )
        callers = [connect(fake), connect(fake, "stolen-token"), connect(fake, "carol-token")]
        for domain, caller in enumerate([*callers, ServerCatalog(claims, owns_graph=True)]):
            caller.emit(
                [MCP(entityUrn=PAYMENTS, aspect=DomainsClass(domains=[f"urn:li:domain:d{domain}"]))]
            )
            caller.close()
        actors = [logged.created.actor for logged in fake.take_change_log()]
    assert actors == [SYSTEM_ACTOR, SYSTEM_ACTOR, SYSTEM_ACTOR, "urn:li:corpuser:mallory"]
