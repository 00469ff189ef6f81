"""Reflex on a DataHub server knows which actor GMS records for its own writes (DESIGN §9),
and refuses to start when DataHub does not accept its credentials."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub_actions.api.action_graph import AcrylDataHubGraph
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.catalog.base import CatalogError
from tests.catalog.fake_gms import SYSTEM_ACTOR, FakeGmsServer

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
    assert action.context.is_own(BOT)
    refusal = action.context.refusal(BOT, "urn:li:glossaryTerm:reflex.lesson.x")
    assert refusal == "Reflex's own writes never pass a human gate"


def test_system_client_credentials_are_accepted(
    secured: FakeGmsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DataHub's own actions authenticate with DATAHUB_SYSTEM_CLIENT_ID/_SECRET: GMS then
    records Reflex's writes as the system actor."""
    monkeypatch.setenv("DATAHUB_SYSTEM_CLIENT_ID", SYSTEM_CLIENT[0])
    monkeypatch.setenv("DATAHUB_SYSTEM_CLIENT_SECRET", SYSTEM_CLIENT[1])
    action = _create(secured, None)
    assert action.context.is_own(SYSTEM_ACTOR)
    assert not action.context.is_own(BOT)
