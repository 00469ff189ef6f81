"""Reflex on a DataHub server knows which actor GMS records for its own writes (DESIGN §9),
and refuses to start when DataHub does not accept its credentials."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub.metadata.schema_classes import (
    GlossaryTermInfoClass,
    MetadataChangeLogClass,
    StringTypeClass,
    StructuredPropertiesClass,
)
from datahub_actions.api.action_graph import AcrylDataHubGraph
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.server import ServerCatalog
from reflex_actions.handlers.authorization import UNAUTHENTICATED
from reflex_actions.handlers.lesson_store import LESSON_PROPERTY, lesson_term_mcp
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, ROOT_CAUSE_STATUS, SCOPE
from tests.catalog.builders import field, schema
from tests.catalog.fake_gms import SYSTEM_ACTOR, FakeGmsServer
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import LESSON, PAYMENTS, SPEC, pending_lesson, properties

BOT = "urn:li:corpuser:reflex-bot"  # the service user's principal, not the configured actor
SYSTEM_CLIENT = ("__datahub_system", "JohnSnowKnowsNothing")


@pytest.fixture
def secured() -> Iterator[FakeGmsServer]:
    """A GMS with metadata-service authentication on."""
    with FakeGmsServer(
        {"bot-token": BOT}, system_client=":".join(SYSTEM_CLIENT), metadata_service_auth=True
    ) as fake:
        yield fake


def _create(fake: FakeGmsServer, token: str | None, **config: object) -> ReflexAction:
    graph = DataHubGraph(DatahubClientConfig(server=fake.url, token=token, retry_max_times=0))
    return ReflexAction.create(dict(config), PipelineContext("reflex", AcrylDataHubGraph(graph)))


def test_without_accepted_credentials_reflex_refuses_to_start(
    secured: FakeGmsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATAHUB_SYSTEM_CLIENT_ID", raising=False)
    monkeypatch.delenv("DATAHUB_SYSTEM_CLIENT_SECRET", raising=False)
    for token in (None, "stolen-token"):
        with pytest.raises(CatalogError, match="DATAHUB_SYSTEM_CLIENT_ID") as refused:
            _create(secured, token)
        assert "Unauthorized" in str(refused.value)


def test_the_token_principal_is_reflex_itself_and_never_passes_a_gate(
    secured: FakeGmsServer,
) -> None:
    """Its writes are recorded as the token's owner: even listed as an approver by mistake,
    that principal is Reflex, and Reflex never approves its own work."""
    action = _create(secured, "bot-token", approvers={"users": [BOT]})
    assert action.context.gate.is_own(BOT)
    refusal = action.context.gate.refusal(BOT, "urn:li:glossaryTerm:reflex.lesson.x")
    assert refusal == "Reflex's own writes never pass a human gate"


def test_system_client_credentials_are_accepted(
    secured: FakeGmsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DataHub's own actions authenticate with DATAHUB_SYSTEM_CLIENT_ID/_SECRET: GMS then
    records Reflex's writes as the system actor."""
    monkeypatch.setenv("DATAHUB_SYSTEM_CLIENT_ID", SYSTEM_CLIENT[0])
    monkeypatch.setenv("DATAHUB_SYSTEM_CLIENT_SECRET", SYSTEM_CLIENT[1])
    action = _create(secured, None)
    assert action.context.gate.is_own(SYSTEM_ACTOR)
    assert not action.context.gate.is_own(BOT)


def _envelope(mcl: MetadataChangeLogClass, offset: int) -> EventEnvelope:
    """The change as the kafka source hands it to the action, with its place in the log."""
    meta = {"kafka": {"topic": "MetadataChangeLog_Versioned_v1", "partition": 0, "offset": offset}}
    return EventEnvelope(
        METADATA_CHANGE_LOG_EVENT_V1_TYPE, MetadataChangeLogEvent.from_class(mcl), meta
    )


def _claiming(fake: FakeGmsServer, actor: str) -> ServerCatalog:
    """A caller that names ``actor`` in ``X-DataHub-Actor``, as the frontend does for its
    session's user, and as any direct caller can."""
    config = DatahubClientConfig(
        server=fake.url, retry_max_times=0, extra_headers={"X-DataHub-Actor": actor}
    )
    return ServerCatalog(DataHubGraph(config), owns_graph=True)


@pytest.mark.parametrize("trusted", [False, True])
def test_without_authentication_a_spoofed_approval_is_refused_unless_trusted(
    trusted: bool,
) -> None:
    """GMS with metadata-service auth off records any actor a caller claims: Reflex finds
    that out at start and refuses every human decision, unless the operator says to trust
    such actors, when the lesson page says its decisions were not authenticated."""
    approver = "urn:li:corpuser:alice"
    with FakeGmsServer({"bot-token": BOT}) as fake:
        for mcp in bootstrap_mcps():  # the property definitions GMS validates against
            fake.put_aspect(mcp.entityUrn, mcp.aspect)  # type: ignore[arg-type]
        lesson = pending_lesson(MemoryCatalog())
        fake.put_aspect(LESSON, lesson_term_mcp(lesson, "t", BOT).aspect)  # type: ignore[arg-type]
        fake.put_aspect(PAYMENTS, schema(field("transaction_id", "VARCHAR", StringTypeClass())))
        before = {ROOT_CAUSE_STATUS: ["CONFIRMED"], APPROVAL: ["PENDING"], SCOPE: [PAYMENTS]}
        before |= {CONTROL_SPEC: [SPEC]}
        fake.put_aspect(LESSON, properties(before))
        action = _create(
            fake,
            "bot-token",
            approvers={"users": [approver]},
            trust_unauthenticated_actors=trusted,
        )
        assert not action.context.actors_authenticated

        spoofer = _claiming(fake, approver)
        spoofer.set_structured_properties(LESSON, {APPROVAL: ["APPROVED"]}, approver)
        spoofer.close()
        (approval,) = fake.take_change_log()
        assert approval.created.actor == approver  # GMS believed the header
        action.act(_envelope(approval, 1))

        reader = _claiming(fake, BOT)
        page = reader.get_aspect(LESSON, GlossaryTermInfoClass)
        assert page is not None
        stored = Lesson.model_validate_json(page.customProperties[LESSON_PROPERTY])
        values = {
            p.propertyUrn: p.values
            for p in (
                reader.get_aspect(LESSON, StructuredPropertiesClass) or properties({})
            ).properties
        }
        reader.close()
        action.close()
    if trusted:
        assert stored.state is LessonState.PUBLISHED
        assert "Decisions not authenticated" in page.definition
    else:
        assert stored.state is LessonState.PENDING_APPROVAL
        assert stored.decisions[-1].detail == UNAUTHENTICATED
        assert values[APPROVAL] == ["PENDING"]  # put back: the next decision is a transition
        assert "metadata-service authentication is off" in page.definition


def test_with_authentication_on_decisions_are_believed(secured: FakeGmsServer) -> None:
    action = _create(secured, "bot-token")
    assert action.context.actors_authenticated
    assert action.context.gate.refusal(BOT, LESSON) == "Reflex's own writes never pass a human gate"
