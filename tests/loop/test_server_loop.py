"""Both demo scenarios, closed over a DataHub server: ``ServerCatalog`` and the FAKE GMS.

The scenarios are the demo's own steps (``reflex_actions.demo.run``), with one difference from
the embedded demo: every write goes to the fake GMS over HTTP as the user who makes it (each
user has a token; GMS records the token's principal as ``created.actor``), and Reflex reacts to
the MetadataChangeLogs the fake emits, delivered to ``ReflexAction`` as the Kafka source would
deliver them. Reflex itself writes with its own token through ``ServerCatalog``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.graph.client import DataHubGraph
from datahub.ingestion.graph.config import DatahubClientConfig
from datahub.metadata.schema_classes import (
    IncidentInfoClass,
    IncidentSourceTypeClass,
    IncidentStateClass,
    MetadataChangeLogClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.server import ServerCatalog
from reflex_actions.catalog.steward import ACTOR_PROPERTY
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import OWNERSHIP_INCIDENT, PAYMENTS_INCIDENT, generate_histories
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.demo.run import (
    HR_ADMIN,
    INTRUDER,
    STEWARD,
    Demo,
    _duplicates,
    _ownership,
    embedded_pipeline_config,
)
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.vocabulary import APPROVAL, SCOPE, SCOPE_RULE
from tests.catalog.fake_gms import SYSTEM_ACTOR, FakeGmsServer

SERVICE_ACTOR = ReflexConfig().service_actor
LEDGER = dataset_urn("finance.ledger_entries")
#: everyone the demo's steps act as: Reflex, the steward, an intruder, the HR admin, the loader
ACTORS = [SERVICE_ACTOR, STEWARD, INTRUDER, HR_ADMIN, DEFAULT_ACTOR]


def _token(actor: str) -> str:
    return f"token-of-{actor.rsplit(':', 1)[-1]}"


#: the system client's ``id:secret`` (DATAHUB_SYSTEM_CLIENT_ID/_SECRET), as ingestion uses it
SYSTEM_CLIENT = "__datahub_system:JohnSnowKnowsNothing"


def _catalog(fake: FakeGmsServer, token: str | None) -> ServerCatalog:
    """A session with the user's token, else the system client's credentials (what an
    ingestion run holds): GMS authenticates every caller."""
    credentials = {} if token else {"Authorization": f"Basic {SYSTEM_CLIENT}"}
    graph = DataHubGraph(
        DatahubClientConfig(
            server=fake.url, token=token, retry_max_times=0, extra_headers=credentials
        )
    )
    return ServerCatalog(graph, owns_graph=True)


@dataclass
class Sessions:
    """Everyone's DataHub session: a write goes out with the token of the user who makes it
    (the ``actor`` argument, or the actor an MCP was stamped with), else with the system
    client's credentials."""

    fake: FakeGmsServer
    _open: dict[str | None, ServerCatalog] = field(default_factory=dict)

    def of(self, actor: str | None) -> ServerCatalog:
        if actor not in self._open:
            self._open[actor] = _catalog(self.fake, _token(actor) if actor else None)
        return self._open[actor]

    def __getattr__(self, name: str) -> Any:  # reads: any session will do
        return getattr(self.of(None), name)

    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        for mcp in mcps:
            stamped = mcp.systemMetadata.properties if mcp.systemMetadata else None
            self.of((stamped or {}).get(ACTOR_PROPERTY)).emit([mcp])

    def set_structured_properties(
        self, urn: str, values: Mapping[str, Sequence[str | float]], actor: str
    ) -> None:
        self.of(actor).set_structured_properties(urn, values, actor)

    def close(self) -> None:
        for catalog in self._open.values():
            catalog.close()


@dataclass
class ServerDemo(Demo):
    """The demo's steps on a DataHub server: ``react`` hands Reflex the fake's change log."""

    fake: FakeGmsServer = field(kw_only=True)

    def __post_init__(self) -> None:
        self.catalog = Sessions(self.fake)  # type: ignore[assignment]
        config = embedded_pipeline_config(self.workdir)["action"]["config"]
        del config["store"]  # no embedded store: Reflex works on the server
        self.action = ReflexAction(
            ReflexConfig.model_validate(config), _catalog(self.fake, _token(SERVICE_ACTOR))
        )
        self.delivered: list[MetadataChangeLogClass] = []
        self.clock = int(time.time() * 1000)

    def react(self) -> None:
        """Deliver every change logged so far, and the ones Reflex's handling logs, in order."""
        while batch := self.fake.take_change_log():
            for mcl in batch:
                self.delivered.append(mcl)
                # one partition: the place in the log is the count of changes before it
                place = {
                    "topic": "MetadataChangeLog",
                    "partition": 0,
                    "offset": len(self.delivered),
                }
                self.action.act(
                    EventEnvelope(
                        METADATA_CHANGE_LOG_EVENT_V1_TYPE,
                        MetadataChangeLogEvent.from_class(mcl),
                        {"kafka": place},
                    )
                )


@dataclass(frozen=True)
class ServerLoop:
    closed: tuple[bool, bool]
    delivered: list[MetadataChangeLogClass]
    demo: ServerDemo


@contextmanager
def _server_demo(workdir: Path) -> Iterator[ServerDemo]:
    """The demo's estate loaded into a fresh fake GMS, and Reflex beside it; at the end, no
    call the fake does not model was made."""
    workdir.mkdir()
    generate_histories(workdir / "snapshots")
    with FakeGmsServer(
        tokens={_token(actor): actor for actor in ACTORS},
        system_client=SYSTEM_CLIENT,
        metadata_service_auth=True,
    ) as fake:
        demo = ServerDemo(workdir, say=lambda _: None, fake=fake)
        try:
            demo.catalog.emit([*bootstrap_mcps(), *estate_mcps()])
            demo.react()
            yield demo
        finally:
            demo.action.close()
            demo.catalog.close()
        assert not fake.unserved, f"calls the fake GMS does not model: {fake.unserved}"


@pytest.fixture(scope="module")
def server_loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerLoop]:
    with _server_demo(tmp_path_factory.mktemp("server-loop") / "demo") as demo:
        closed = (_duplicates(demo), _ownership(demo))
        yield ServerLoop(closed, demo.delivered, demo)


def test_both_scenarios_close_the_loop_over_the_server(server_loop: ServerLoop) -> None:
    assert server_loop.closed == (True, True)
    for incident in (PAYMENTS_INCIDENT, OWNERSHIP_INCIDENT):
        lesson = server_loop.demo.lesson(incident)
        assert lesson.state is LessonState.PUBLISHED
        approvals = [d for d in lesson.decisions if d.decision == "scope approved"]
        assert [d.actor for d in approvals] == [STEWARD]


def test_incident_b_on_the_ledger_comes_from_its_assertion(server_loop: ServerLoop) -> None:
    lesson = server_loop.demo.lesson(PAYMENTS_INCIDENT)
    (recurrence,) = [r for r in lesson.recurrences if r.dataset == LEDGER]
    info = server_loop.demo.catalog.get_aspect(recurrence.incident, IncidentInfoClass)
    assert info is not None and info.source is not None
    assert info.source.type == IncidentSourceTypeClass.ASSERTION_FAILURE
    assert info.source.sourceUrn == assertion_urn(lesson.urn, LEDGER)
    assert (info.entities, info.status.state) == ([LEDGER], IncidentStateClass.ACTIVE)


def test_reflex_saw_each_change_as_the_user_who_made_it(server_loop: ServerLoop) -> None:
    """The approvals Reflex acted on carry the principal of the token that wrote them; Reflex's
    own writes carry its service principal, and the initial load (by the system client's
    credentials) the system actor."""
    lesson_urn = lesson_urn_for(PAYMENTS_INCIDENT)
    approvals = [
        (mcl.created.actor, _approval(mcl))
        for mcl in server_loop.delivered
        if mcl.entityUrn == lesson_urn
        and mcl.aspectName == "structuredProperties"
        and _approval(mcl) != _approval(mcl, previous=True)
    ]
    # Reflex opens the gate; the intruder's approval is refused, the steward's publishes
    assert approvals[0] == (SERVICE_ACTOR, ["PENDING"])
    assert [actor for actor, values in approvals if values == ["APPROVED"]] == [INTRUDER, STEWARD]
    writers = {mcl.created.actor for mcl in server_loop.delivered}
    assert {SYSTEM_ACTOR, SERVICE_ACTOR, STEWARD, INTRUDER} <= writers


def _approval(mcl: MetadataChangeLogClass, previous: bool = False) -> list[Any]:
    aspect = mcl.previousAspectValue if previous else mcl.aspect
    properties = json.loads(aspect.value)["properties"] if aspect else []
    values = next((p["values"] for p in properties if p["propertyUrn"] == APPROVAL), [])
    return [value["string"] for value in values]


def test_the_workdir_holds_no_embedded_store(server_loop: ServerLoop) -> None:
    assert not (Path(server_loop.demo.workdir) / "reflex.db").exists()


def test_a_scope_rule_is_published_over_the_server_where_the_search_finds_it(
    tmp_path: Path,
) -> None:
    """A published lesson's scope edited to a rule, approved: the rule is expanded by
    DataHub's search (``ServerCatalog``), published in slices through GMS, and each dataset
    believed by the assertion Reflex's token wrote there."""
    with _server_demo(tmp_path / "demo") as demo:
        assert _duplicates(demo)
        lesson_urn = lesson_urn_for(PAYMENTS_INCIDENT)
        rule = {SCOPE: [], SCOPE_RULE: ["{field: transaction_id}"]}
        demo.catalog.set_structured_properties(lesson_urn, rule, STEWARD)
        demo.react()
        demo.steward_sets(lesson_urn, APPROVAL, "APPROVED")
        demo.action.close()  # the worker carries the rollout to its end first

        lesson = demo.lesson(PAYMENTS_INCIDENT)
        assert lesson.rollout is None and lesson.approved is not None
        assert lesson.approved.scope_rule is not None
        matching = demo.catalog.datasets_by_field("transaction_id")
        reader = HandlerContext(demo.catalog.of(None), demo.action.context.config)
        covered = [urn for urn in matching if reader.published_lessons(urn) == [lesson]]
        assert len(covered) == lesson.published_count == len(matching) - 1  # chargebacks
