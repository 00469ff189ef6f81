"""The production event path: ``datahub actions -c`` (reflex.yaml's kafka source) on a real
Kafka-protocol broker, fed by the MCLs GMS would publish for each write to the store.

The steward's steps are those of ``datahub-reflex demo`` (reflex_actions/demo/run.py); here the
pipeline runs as its own long-lived process and every wait on the store is bounded.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from datahub.metadata.schema_classes import IncidentInfoClass, OperationClass, OperationTypeClass
from datahub_actions.cli.actions import load_raw_config_file

from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER, PAYMENTS_INCIDENT
from reflex_actions.demo.run import PAYMENTS_NOTE, STEWARD
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import (
    LESSON_PREFIX,
    lesson_urn_for,
    load_lesson,
    structured_values,
)
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS, SCOPE
from tests.kafka.infra import (
    GMS_SCHEMAS,
    LIBRDKAFKA_LOG,
    REFLEX_YAML,
    TIMESERIES_TOPIC,
    VERSIONED_TOPIC,
    ActionsProcess,
    DemoFolder,
    GmsMclBridge,
    GmsSchemaRegistry,
    TansuBroker,
    avsc,
    wait_until,
)

LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
PAYMENTS = dataset_urn("finance.payments")
LEDGER = dataset_urn("finance.ledger_entries")
INCIDENT_B = recurrence_incident_urn(assertion_urn(LESSON, LEDGER), LANDING_DAY.isoformat())
#: generous per step (each is ~1-5 s here); the whole folder stays well under 3 minutes
STEP_TIMEOUT = 60.0


@dataclass
class Loop:
    """The duplicate-rows scenario, step by step, against a running actions process."""

    demo: DemoFolder
    actions: ActionsProcess
    bridge: GmsMclBridge

    def context(self) -> str:
        return (
            f"bridge delivered {dict(self.bridge.delivered)}, errors {self.bridge.errors[-3:]}\n"
            + self.actions.log_tail()
        )

    def wait(self, condition: Callable[[], Any], what: str, timeout: float = STEP_TIMEOUT) -> Any:
        return wait_until(condition, timeout=timeout, what=what, context=self.context)

    def lesson(self) -> Lesson | None:
        return load_lesson(self.demo.catalog, LESSON)

    def in_state(self, state: LessonState) -> Lesson | None:
        lesson = self.lesson()
        return lesson if lesson is not None and lesson.state is state else None

    def resolve_incident_a(self) -> Lesson:
        resolve_incident(self.demo.catalog, PAYMENTS_INCIDENT, PAYMENTS_NOTE, STEWARD)
        return self.wait(self.lesson, "the lesson to be drafted")

    def confirm(self) -> None:
        self.demo.catalog.set_structured_properties(
            LESSON, {ROOT_CAUSE_STATUS: ["CONFIRMED"]}, STEWARD
        )
        self.wait(
            lambda: structured_values(self.demo.catalog, LESSON, APPROVAL) == ["PENDING"],
            "reflex.approval = PENDING (backtest report written)",
        )

    def approve(self) -> None:
        self.demo.catalog.set_structured_properties(LESSON, {APPROVAL: ["APPROVED"]}, STEWARD)

    def wait_published(self) -> Lesson:
        return self.wait(lambda: self.in_state(LessonState.PUBLISHED), "the lesson to be published")

    def land_on_ledger(self) -> None:
        """New data lands on finance.ledger_entries: the operation a loader reports."""
        snapshot = (
            self.demo.snapshots
            / LANDING_FOLDER
            / "finance.ledger_entries"
            / f"{LANDING_DAY}.parquet"
        )
        operation = OperationClass(
            timestampMillis=1_790_000_000_000,
            operationType=OperationTypeClass.INSERT,
            customProperties={"snapshot": str(snapshot), "snapshot_id": LANDING_DAY.isoformat()},
            lastUpdatedTimestamp=1_790_000_000_000,
        )
        self.demo.catalog.emit([acting_as(DEFAULT_ACTOR, LEDGER, operation)])

    def wait_incident_b(self) -> IncidentInfoClass:
        def raised() -> IncidentInfoClass | None:
            lesson = self.lesson()
            if lesson is None or not any(r.incident == INCIDENT_B for r in lesson.recurrences):
                return None
            return self.demo.catalog.get_aspect(INCIDENT_B, IncidentInfoClass)

        return self.wait(raised, "incident B on finance.ledger_entries")


def latest_aspects(store: Path, aspect_name: str, urn_prefix: str) -> dict[str, dict[str, Any]]:
    """urn -> the latest value of one aspect, for every entity whose urn starts with the prefix."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT urn, metadata FROM metadata_aspect_v2 "
            "WHERE version = 0 AND aspect_name = ? AND urn LIKE ? ORDER BY urn",
            [aspect_name, urn_prefix + "%"],
        ).fetchall()
    return {urn: json.loads(metadata) for urn, metadata in rows}


def assert_loop_closed(demo: DemoFolder) -> Lesson:
    """The final state of the duplicate-rows scenario, counted in the store: one lesson,
    published on its scope, one assertion per scoped dataset, one incident B on the ledger."""
    lessons = latest_aspects(demo.store, "glossaryTermInfo", LESSON_PREFIX)
    assert list(lessons) == [LESSON]
    lesson = load_lesson(demo.catalog, LESSON)
    assert lesson is not None and lesson.state is LessonState.PUBLISHED
    assert [d.decision for d in lesson.decisions] == ["root cause confirmed", "scope approved"]
    scope = [str(urn) for urn in structured_values(demo.catalog, LESSON, SCOPE)]
    assert LEDGER in scope and sorted(lesson.published_scope) == sorted(scope)

    assertions = latest_aspects(demo.store, "assertionInfo", "urn:li:assertion:")
    assert sorted(assertions) == sorted(assertion_urn(LESSON, urn) for urn in scope)
    assert sorted(a["customAssertion"]["entity"] for a in assertions.values()) == sorted(scope)

    incidents = latest_aspects(demo.store, "incidentInfo", "urn:li:incident:")
    raised = {
        urn: info
        for urn, info in incidents.items()
        if (info.get("source") or {}).get("type") == "ASSERTION_FAILURE"
    }
    assert list(raised) == [INCIDENT_B]
    assert raised[INCIDENT_B]["entities"] == [LEDGER]
    assert raised[INCIDENT_B]["source"]["sourceUrn"] == assertion_urn(LESSON, LEDGER)
    assert [(r.incident, r.dataset) for r in lesson.recurrences] == [(INCIDENT_B, LEDGER)]
    return lesson


def test_registry_answers_like_gms(registry: GmsSchemaRegistry) -> None:
    """The fixture's contract: fixed ids, DataHub's schemas, register = look up the topic."""

    def call(method: str, path: str) -> tuple[int, Any]:
        body = b"{}" if method == "POST" else None
        request = urllib.request.Request(registry.url + path, data=body, method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                text = response.read()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            return error.code, None

    for topic, (schema_id, file) in GMS_SCHEMAS.items():
        assert call("POST", f"subjects/{topic}-value/versions") == (200, {"id": schema_id})
        status, body = call("GET", f"schemas/ids/{schema_id}")
        assert status == 200 and body["schemaType"] == "AVRO" and body["maxId"] == schema_id
        assert json.loads(body["schema"]) == json.loads(avsc(file))
    assert (GMS_SCHEMAS[VERSIONED_TOPIC][0], GMS_SCHEMAS[TIMESERIES_TOPIC][0]) == (18, 19)
    assert call("GET", "schemas/ids/999")[0] == 404
    assert call("POST", "subjects/Unknown_v1-value/versions")[0] == 404
    assert call("GET", "subjects")[0] == 501
    assert call("GET", "associations/resources/-/x")[0] == 404


def test_duplicate_rows_loop_closes_through_kafka(
    demo: DemoFolder, bridge: GmsMclBridge, make_actions: Callable[..., ActionsProcess]
) -> None:
    actions = make_actions()
    actions.start()
    loop = Loop(demo, actions, bridge)

    drafted = loop.resolve_incident_a()
    assert drafted.state is LessonState.PROPOSED and drafted.source_dataset == PAYMENTS
    loop.confirm()
    loop.approve()
    assert LEDGER in loop.wait_published().published_scope
    loop.land_on_ledger()
    incident_b = loop.wait_incident_b()

    assert incident_b.source is not None and incident_b.source.type == "ASSERTION_FAILURE"
    assert_loop_closed(demo)
    # Each step travelled as GMS publishes it: operations and run events on the timeseries topic.
    bridge.wait_idle()
    assert (TIMESERIES_TOPIC, LEDGER, "operation") in bridge.sent
    assert (TIMESERIES_TOPIC, assertion_urn(LESSON, LEDGER), "assertionRunEvent") in bridge.sent
    assert (VERSIONED_TOPIC, LESSON, "structuredProperties") in bridge.sent
    assert actions.alive and not bridge.errors


def test_kill_9_mid_loop_then_restart_converges(
    demo: DemoFolder, bridge: GmsMclBridge, make_actions: Callable[..., ActionsProcess]
) -> None:
    """Killed right after the approval is written: no shutdown hook, offsets not committed
    (auto-commit every 10 s). The restarted process replays from the last commit, and the
    deterministic urns and state checks make the replay change nothing twice."""
    actions = make_actions()
    actions.start()
    loop = Loop(demo, actions, bridge)
    loop.resolve_incident_a()
    loop.confirm()

    loop.approve()
    wait_until(bridge.idle, timeout=10, what="the approval to reach the broker", interval=0.01)
    actions.kill9()
    killed_at = loop.lesson()
    assert killed_at is not None and killed_at.state in (
        LessonState.PENDING_APPROVAL,
        LessonState.PUBLISHED,
    )

    actions.start()
    loop.wait_published()
    loop.land_on_ledger()
    loop.wait_incident_b()
    assert_loop_closed(demo)
    assert actions.alive and actions.starts == 2


def test_malformed_messages_are_logged_and_skipped(
    demo: DemoFolder,
    broker: TansuBroker,
    registry: GmsSchemaRegistry,
    bridge: GmsMclBridge,
    make_actions: Callable[..., ActionsProcess],
) -> None:
    bridge.wait_idle()
    junk = {
        b"not-avro": b"garbage bytes, no Confluent frame",
        b"unknown-id": b"\x00" + (4242).to_bytes(4, "big") + b"\x02\x04",
        b"truncated": b"\x00" + (18).to_bytes(4, "big") + b"\x0c",
    }
    with closing(
        Producer({"bootstrap.servers": broker.bootstrap, "logger": LIBRDKAFKA_LOG})
    ) as raw:
        for key, value in junk.items():
            raw.produce(VERSIONED_TOPIC, key=key, value=value)
        assert raw.flush(10) == 0
    actions = make_actions()
    actions.start()

    # Queued after the junk on the same partition: handled only if the junk was skipped.
    Loop(demo, actions, bridge).resolve_incident_a()

    errors = [line for line in actions.log().splitlines() if "Kafka consume error" in line]
    assert len(errors) == len(junk), actions.log_tail()
    assert all("_VALUE_DESERIALIZATION" in line for line in errors)
    assert "Invalid magic byte" in errors[0]
    assert "HTTP status code 404" in errors[1]
    assert ("GET", f"{registry.PREFIX}/schemas/ids/4242", 404) in registry.requests
    assert actions.alive


def test_broker_restart_recovers(
    demo: DemoFolder,
    broker: TansuBroker,
    bridge: GmsMclBridge,
    make_actions: Callable[..., ActionsProcess],
) -> None:
    """tansu is killed and started again on the same port with empty memory storage: topics
    re-created empty (as DataHub's kafka-setup job would), the consumer group and its offsets
    gone. Observed (and asserted): the kafka source logs the outage through its error callback
    and keeps polling; librdkafka reconnects, the consumer rejoins its group, resumes at the
    earliest offset of the new topic and the pipeline handles the next event. The bridge's
    producer reconnects too. The process never exits."""
    actions = make_actions()
    actions.start()
    loop = Loop(demo, actions, bridge)
    loop.resolve_incident_a()
    bridge.wait_idle()
    assert broker.end_offset(VERSIONED_TOPIC) > 0

    broker.restart()
    assert broker.end_offset(VERSIONED_TOPIC) == 0  # memory storage: everything is gone
    loop.confirm()  # published on the new broker only

    lesson = loop.lesson()
    assert lesson is not None and lesson.state is LessonState.PENDING_APPROVAL
    assert actions.alive and broker.starts == 2
    log = actions.log()
    assert "Kafka client error in pipeline" in log and "_ALL_BROKERS_DOWN" in log, log[-3000:]


def test_shipped_reflex_yaml_loads_as_the_cli_reads_it() -> None:
    """``datahub actions -c`` reads the raw file as YAML before expanding ``${...}``: an
    unquoted ``[${VAR:-default}]`` flow item made it refuse reflex.yaml outright."""
    config = load_raw_config_file(REFLEX_YAML)
    assert config["source"]["type"] == "kafka" and config["action"]["type"] == "reflex"
    assert config["action"]["config"]["landing"]["allowed_roots"] == [
        "${REFLEX_LANDING:-/data/reflex/landing}"
    ]
