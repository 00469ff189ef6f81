"""The reflex-lite source turns DataHub Lite's aspect history into the MCL events GMS publishes."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    DatasetPropertiesClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    SystemMetadataClass,
    _Aspect,
)
from datahub_actions.action.action import Action
from datahub_actions.action.action_registry import action_registry
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)
from datahub_actions.pipeline.pipeline import Pipeline
from datahub_actions.pipeline.pipeline_context import PipelineContext
from datahub_actions.plugin.source.kafka.kafka_event_source import (
    build_metadata_change_log_event,
)
from datahub_actions.source.event_source_registry import event_source_registry

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.source.lite_change_feed import ChangeFeedError, LiteChangeFeedSource

INCIDENT = "urn:li:incident:duplicate-payments"
DATASET = "urn:li:dataset:(urn:li:dataPlatform:duckdb,finance.payments,PROD)"
TERM = "urn:li:glossaryTerm:reflex.lessons.duplicate-payments"
STEWARD = "urn:li:corpuser:steward"
CTX = PipelineContext(pipeline_name="test-lite-change-feed", graph=None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LiteCatalog]:
    catalog = LiteCatalog(tmp_path / "lite.db")
    yield catalog
    catalog.close()


def feed(catalog: LiteCatalog, **config: Any) -> LiteChangeFeedSource:
    return LiteChangeFeedSource.create(
        {"store": str(catalog.path), "stop_when_idle": True, "poll_interval_seconds": 0.01}
        | config,
        CTX,
    )


def drain(source: LiteChangeFeedSource) -> list[EventEnvelope]:
    """Every event up to now, each acked, then the source closed: what the pipeline does."""
    events = []
    for envelope in source.events():
        events.append(envelope)
        source.ack(envelope)
    source.close()
    return events


def write(catalog: LiteCatalog, urn: str, aspect: _Aspect, actor: str | None = None) -> None:
    system = SystemMetadataClass(properties={"actor": actor}) if actor else None
    catalog.emit(
        [MetadataChangeProposalWrapper(entityUrn=urn, aspect=aspect, systemMetadata=system)]
    )


def incident(state: str) -> IncidentInfoClass:
    stamp = AuditStampClass(time=1_700_000_000_000, actor=STEWARD)
    return IncidentInfoClass(
        type=IncidentTypeClass.OPERATIONAL,
        entities=[DATASET],
        status=IncidentStatusClass(
            state=state, lastUpdated=stamp, message="retry was not idempotent"
        ),
        created=stamp,
        title="Duplicate payments",
    )


def root_cause(status: str) -> StructuredPropertiesClass:
    return StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(
                propertyUrn="urn:li:structuredProperty:reflex.rootCauseStatus", values=[status]
            )
        ]
    )


def operation(timestamp: int) -> OperationClass:
    return OperationClass(
        timestampMillis=timestamp,
        operationType=OperationTypeClass.INSERT,
        lastUpdatedTimestamp=timestamp,
    )


def parse(aspect_class: type[_Aspect], value: bytes | str) -> _Aspect:
    return aspect_class.from_obj(json.loads(value))


def rowids(events: list[EventEnvelope]) -> list[int]:
    return [envelope.meta["lite"]["rowid"] for envelope in events]


def versioned_rows(catalog: LiteCatalog) -> list[tuple[int, int, int]]:
    """(rowid, version, createdon) of the store's versioned rows, oldest first, read directly."""
    with closing(sqlite3.connect(catalog.path)) as db:
        return db.execute(
            "SELECT rowid, version, createdon FROM metadata_aspect_v2 "
            "WHERE version > 0 ORDER BY rowid"
        ).fetchall()


def offset_state(catalog: LiteCatalog) -> dict[str, Any]:
    return json.loads(Path(f"{catalog.path}.reflex-offset").read_text())


def test_versions_become_mcl_envelopes_with_previous_value_and_actor(store: LiteCatalog) -> None:
    write(store, INCIDENT, incident(IncidentStateClass.ACTIVE))
    write(store, INCIDENT, incident(IncidentStateClass.RESOLVED), actor=STEWARD)
    rows = versioned_rows(store)

    first, second = drain(feed(store))

    for envelope, row in zip((first, second), rows, strict=True):
        assert envelope.event_type is METADATA_CHANGE_LOG_EVENT_V1_TYPE
        assert isinstance(envelope.event, MetadataChangeLogEvent)
        assert envelope.meta == {"lite": {"rowid": row[0]}}
        event = envelope.event
        assert (event.entityType, event.entityUrn) == ("incident", INCIDENT)
        assert (event.changeType, event.aspectName) == (ChangeTypeClass.UPSERT, "incidentInfo")
        assert event.aspect.contentType == "application/json"
        assert event.created.time == row[2]
        assert event.systemMetadata.properties["sysVersion"] == str(row[1])
    assert parse(IncidentInfoClass, first.event.aspect.value) == incident(IncidentStateClass.ACTIVE)
    assert first.event.previousAspectValue is None
    assert first.event.previousSystemMetadata is None
    assert first.event.created.actor == "urn:li:corpuser:datahub"

    resolved = second.event
    assert parse(IncidentInfoClass, resolved.aspect.value) == incident(IncidentStateClass.RESOLVED)
    previous = parse(IncidentInfoClass, resolved.previousAspectValue.value)
    assert previous == incident(IncidentStateClass.ACTIVE)
    assert resolved.previousSystemMetadata.properties["sysVersion"] == "1"
    assert resolved.created.actor == STEWARD


def test_structured_property_change_carries_both_values(store: LiteCatalog) -> None:
    write(store, TERM, root_cause("PROPOSED"))
    write(store, TERM, root_cause("CONFIRMED"), actor=STEWARD)

    _, confirmed = drain(feed(store))

    assert (confirmed.event.entityType, confirmed.event.aspectName) == (
        "glossaryTerm",
        "structuredProperties",
    )
    assert parse(StructuredPropertiesClass, confirmed.event.aspect.value) == root_cause("CONFIRMED")
    previous = confirmed.event.previousAspectValue.value
    assert parse(StructuredPropertiesClass, previous) == root_cause("PROPOSED")


def test_timeseries_aspects_come_through_without_previous_value_as_on_gms(
    store: LiteCatalog,
) -> None:
    write(store, DATASET, operation(1_000))
    write(store, DATASET, operation(2_000))

    events = drain(feed(store))

    assert [parse(OperationClass, e.event.aspect.value) for e in events] == [
        operation(1_000),
        operation(2_000),
    ]
    assert {e.event.aspectName for e in events} == {"operation"}
    assert [e.event.previousAspectValue for e in events] == [None, None]


def test_identical_rewrite_produces_no_event(store: LiteCatalog) -> None:
    write(store, DATASET, DatasetPropertiesClass(name="payments"))
    write(store, DATASET, DatasetPropertiesClass(name="payments"))
    write(store, DATASET, DatasetPropertiesClass(name="payments v2"))

    events = drain(feed(store))

    assert [parse(DatasetPropertiesClass, e.event.aspect.value).name for e in events] == [
        "payments",
        "payments v2",
    ]
    assert parse(DatasetPropertiesClass, events[1].event.previousAspectValue.value).name == (
        "payments"
    )


def test_envelope_is_what_the_kafka_source_yields_for_the_same_mcl(store: LiteCatalog) -> None:
    """Serialize with DataHub's MCL Avro schema, read back exactly as the kafka source does."""
    write(store, INCIDENT, incident(IncidentStateClass.ACTIVE))
    write(store, INCIDENT, incident(IncidentStateClass.RESOLVED), actor=STEWARD)
    lite = drain(feed(store))[-1].event

    registry = SchemaRegistryClient.new_client({"url": "mock://reflex"})
    schema = (resources.files("datahub.metadata") / "schemas/MetadataChangeLog.avsc").read_text()
    context = SerializationContext("MetadataChangeLog_Versioned_v1", MessageField.VALUE)
    wire = AvroSerializer(registry, schema, lambda mcl, _: mcl.to_obj(tuples=True))(lite, context)
    value = AvroDeserializer(registry, return_record_name=True)(wire, context)

    class Message:
        def value(self) -> dict[str, Any]:
            return value

    kafka = build_metadata_change_log_event(Message())
    assert kafka.to_obj() == lite.to_obj()
    assert type(kafka.aspect.value) is type(lite.aspect.value) is bytes
    assert kafka.as_json() == lite.as_json()


def test_out_of_order_acks_survive_restarts_without_replay_or_loss(store: LiteCatalog) -> None:
    for name in "abcd":
        write(store, DATASET, DatasetPropertiesClass(name=name))
    first = feed(store, stop_when_idle=False)
    stream = iter(first.events())
    a, b, c, d = (next(stream) for _ in range(4))
    first.ack(a)
    first.ack(c, processed=False)  # declined by the action: still delivered
    first.close()  # "crash" with b and d unacked
    assert offset_state(store) == {"offset": rowids([b])[0] - 1, "acked": rowids([c])}

    second = feed(store)
    assert rowids([next(iter(second.events()))]) == rowids([b])
    second.close()  # crash again before acking b: c must still not come back

    assert rowids(drain(feed(store, batch_size=1))) == rowids([b, d])
    assert offset_state(store) == {"offset": rowids([d])[0], "acked": []}
    assert drain(feed(store)) == []


def test_start_from_latest_skips_history_and_is_pinned_at_creation(store: LiteCatalog) -> None:
    write(store, DATASET, DatasetPropertiesClass(name="old"))
    latest = feed(store, start_from="latest")
    latest.close()
    write(store, DATASET, DatasetPropertiesClass(name="new"))

    events = drain(feed(store, start_from="latest"))

    assert [parse(DatasetPropertiesClass, e.event.aspect.value).name for e in events] == ["new"]


def test_stop_when_idle_waits_for_outstanding_acks(store: LiteCatalog) -> None:
    write(store, DATASET, DatasetPropertiesClass(name="payments"))
    source = feed(store)
    stream = iter(source.events())
    envelope = next(stream)
    threading.Timer(0.05, source.ack, [envelope]).start()

    assert list(stream) == []  # returns only once the ack has arrived
    assert offset_state(store)["offset"] == rowids([envelope])[0]


def test_request_stop_ends_a_waiting_feed_promptly(store: LiteCatalog) -> None:
    source = feed(store, stop_when_idle=False, poll_interval_seconds=30)
    worker = threading.Thread(target=lambda: list(source.events()))
    worker.start()
    time.sleep(0.1)  # let the feed settle into its 30 s idle wait

    source.request_stop()
    worker.join(timeout=2)

    assert not worker.is_alive()
    source.close()


def test_malformed_rows_are_logged_and_skipped(
    store: LiteCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    broken = "urn:li:dataset:(urn:li:dataPlatform:duckdb,broken,PROD)"
    write(store, DATASET, DatasetPropertiesClass(name="before"))
    with closing(sqlite3.connect(store.path)) as db, db:
        db.executemany(
            "INSERT INTO metadata_aspect_v2 VALUES (?, 'datasetProperties', 1, ?, '{}', 0)",
            [(broken, '{"name": '), ("not-a-urn", '{"name": "x"}')],
        )
    broken_json, broken_urn = (row[0] for row in versioned_rows(store)[1:])
    write(store, TERM, root_cause("PROPOSED"))

    with caplog.at_level(logging.WARNING):
        events = drain(feed(store))

    assert [e.event.aspectName for e in events] == ["datasetProperties", "structuredProperties"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"skipping Lite row {broken_json} ({broken}, aspect datasetProp")
    assert warnings[1].startswith(f"skipping Lite row {broken_urn} (not-a-urn, aspect datasetProp")
    assert offset_state(store) == {"offset": rowids(events)[-1], "acked": []}


def test_bad_store_or_offset_file_fails_at_create(tmp_path: Path, store: LiteCatalog) -> None:
    missing = tmp_path / "nowhere.db"
    with pytest.raises(ChangeFeedError, match=r"nowhere\.db does not exist"):
        LiteChangeFeedSource.create({"store": str(missing)}, CTX)
    assert not missing.exists()

    not_lite = tmp_path / "other.db"
    sqlite3.connect(not_lite).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ChangeFeedError, match="not a DataHub Lite store"):
        LiteChangeFeedSource.create({"store": str(not_lite)}, CTX)

    garbled = tmp_path / "garbled-offset"
    garbled.write_text("{")
    with pytest.raises(ChangeFeedError, match="unreadable offset file"):
        feed(store, offset_file=str(garbled))


def test_offset_past_the_end_of_a_recreated_store_fails_at_create(tmp_path: Path) -> None:
    old = LiteCatalog(tmp_path / "old.db")
    write(old, DATASET, DatasetPropertiesClass(name="payments"))
    write(old, DATASET, DatasetPropertiesClass(name="payments v2"))
    offset_file = str(tmp_path / "offset")
    drain(feed(old, offset_file=offset_file))
    old.close()
    recreated = LiteCatalog(tmp_path / "new.db")
    write(recreated, DATASET, DatasetPropertiesClass(name="payments"))

    with pytest.raises(ChangeFeedError, match="was the store recreated"):
        feed(recreated, offset_file=offset_file)
    recreated.close()


class RecordingAction(Action):
    """Keeps every event it is handed."""

    def __init__(self) -> None:
        self.events: list[EventEnvelope] = []

    @classmethod
    def create(cls, config_dict: dict, ctx: PipelineContext) -> RecordingAction:
        return cls()

    def act(self, event: EventEnvelope) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


@pytest.fixture
def registered() -> None:
    """Register the plugins unless installed entry points already did (then those are tested)."""
    if "reflex-lite" not in event_source_registry.mapping:
        event_source_registry.register("reflex-lite", LiteChangeFeedSource)
    action_registry.register("reflex-test-recorder", RecordingAction, override=True)


@pytest.mark.usefixtures("registered")
def test_datahub_actions_pipeline_delivers_the_feed(store: LiteCatalog, tmp_path: Path) -> None:
    write(store, INCIDENT, incident(IncidentStateClass.ACTIVE))
    write(store, INCIDENT, incident(IncidentStateClass.RESOLVED), actor=STEWARD)
    write(store, DATASET, operation(1_000))
    pipeline = Pipeline.create(
        {
            "name": "reflex-lite-test",
            "source": {
                "type": "reflex-lite",
                "config": {"store": str(store.path), "stop_when_idle": True},
            },
            "action": {"type": "reflex-test-recorder"},
            "options": {"failed_events_dir": str(tmp_path / "failed")},
        }
    )

    pipeline.run()
    pipeline.close()

    assert isinstance(pipeline.action, RecordingAction)
    delivered = pipeline.action.events
    assert [(e.event.entityType, e.event.aspectName) for e in delivered] == [
        ("incident", "incidentInfo"),
        ("incident", "incidentInfo"),
        ("dataset", "operation"),
    ]
    assert pipeline.stats().success_count == 3
    assert offset_state(store) == {"offset": versioned_rows(store)[-1][0], "acked": []}
