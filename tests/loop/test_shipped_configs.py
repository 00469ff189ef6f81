"""The shipped pipeline configs load the way `datahub actions -c` loads them, and fit the code."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, get_args

import confluent_kafka
import pytest
from datahub_actions.action.action_registry import action_registry
from datahub_actions.filter.filter_registry import filter_registry
from datahub_actions.pipeline.pipeline_context import PipelineContext
from datahub_actions.plugin.source.kafka import kafka_event_source
from datahub_actions.plugin.source.kafka.kafka_event_source import (
    KafkaEventSource,
    KafkaEventSourceConfig,
)
from datahub_actions.source.event_source_registry import event_source_registry
from pydantic import BaseModel

from reflex_actions.action.reflex_action import ROUTES, ReflexAction
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.run import embedded_pipeline_config
from reflex_actions.source.lite_change_feed import LiteChangeFeedSource
from tests.loop.configs import (
    EMBEDDED,
    PRODUCTION,
    load_pipeline,
    referenced_variables,
    yaml_error,
)

MCL = "MetadataChangeLogEvent_v1"
CTX = PipelineContext(pipeline_name="shipped-config-test", graph=None)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every variable the shipped configs read, so the host environment cannot leak in."""
    for path in (EMBEDDED, PRODUCTION):
        for name in referenced_variables(path):
            monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("path", [EMBEDDED, PRODUCTION], ids=lambda p: p.name)
def test_the_shipped_configs_are_yaml(path: Path) -> None:
    assert yaml_error(path) is None


def _routed(filters: list[Any] | None) -> set[tuple[str, str]]:
    assert filters is not None and len(filters) == 1
    spec = filters[0] if isinstance(filters[0], dict) else filters[0].model_dump()
    assert spec["type"] == "event_type"
    events = spec["config"]["filter"][MCL]["event"]
    return {(e["entityType"], e["aspectName"]) for e in events}


def test_the_embedded_config_is_the_demo_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = embedded_pipeline_config(tmp_path)
    action = demo["action"]["config"]
    monkeypatch.setenv("REFLEX_STORE", action["store"])
    monkeypatch.setenv("REFLEX_HISTORIES", action["histories"]["root"])
    monkeypatch.setenv("REFLEX_LANDING", action["landing"]["allowed_roots"][0])

    config = load_pipeline(EMBEDDED)

    assert config.name == demo["name"]
    assert config.source.type == demo["source"]["type"] == "reflex-lite"
    assert config.source.config is not None
    assert config.source.config["store"] == demo["source"]["config"]["store"]
    assert [f.model_dump() for f in config.filters or []] == demo["filters"]
    assert _routed(config.filters) == set(ROUTES)
    assert config.action.type == demo["action"]["type"] == "reflex"
    assert config.action.config is not None
    assert set(config.action.config) == set(action)
    assert ReflexConfig.model_validate(config.action.config) == ReflexConfig.model_validate(action)
    assert config.options is not None
    assert config.options.retry_count == demo["options"]["retry_count"]
    assert config.options.failure_mode is not None
    assert config.options.failure_mode.value == demo["options"]["failure_mode"]

    # the plugins accept their blocks exactly as `datahub actions` would hand them over
    LiteCatalog(action["store"]).close()
    source = event_source_registry.get(config.source.type).create(config.source.config, CTX)
    reflex = action_registry.get(config.action.type).create(config.action.config, CTX)
    try:
        assert isinstance(source, LiteChangeFeedSource)
        assert isinstance(reflex, ReflexAction)
        for spec in config.filters or []:
            filter_registry.get(spec.type).create(spec.config or {}, CTX)
    finally:
        source.close()
        reflex.close()


def test_the_embedded_config_defaults_to_the_working_folder() -> None:
    config = load_pipeline(EMBEDDED)
    assert config.source.config == {"store": "reflex.db", "tick_interval_seconds": "60"}
    reflex = ReflexConfig.model_validate(config.action.config)
    assert reflex.schedule.interval_seconds == 3600
    assert reflex.store == Path("reflex.db")
    assert reflex.landing.allowed_roots == [Path("snapshots/landing")]
    assert reflex.landing.locator == "snapshots/landing/{name}/{snapshot_id}.parquet"


def test_the_production_config_is_a_kafka_pipeline_with_a_gms() -> None:
    config = load_pipeline(PRODUCTION)

    assert config.source.type == "kafka"
    kafka = KafkaEventSourceConfig.model_validate(config.source.config)
    assert kafka.connection.bootstrap == "localhost:9092"
    assert kafka.connection.schema_registry_url == "http://localhost:8080/schema-registry/api/"
    assert kafka.topic_routes == {
        "mcl": "MetadataChangeLog_Versioned_v1",
        "mcl_timeseries": "MetadataChangeLog_Timeseries_v1",
    }
    assert config.datahub is not None and config.datahub.server == "http://localhost:8080"
    assert _routed(config.filters) == set(ROUTES)
    assert config.action.type == "reflex"
    reflex = ReflexConfig.model_validate(config.action.config)
    assert reflex.store is None  # reads and writes go to the GMS of the `datahub:` block
    assert reflex.service_actor == "urn:li:corpuser:datahub-reflex"
    assert reflex.histories.root == Path("/data/reflex/history")
    assert reflex.landing.allowed_roots == [Path("/data/reflex/landing")]


def test_the_production_config_reads_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFLEX_PIPELINE_NAME", "reflex-replica")
    monkeypatch.setenv("DATAHUB_GMS_URL", "http://datahub-gms:8080")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVER", "broker:29092")
    monkeypatch.setenv("REFLEX_LANDING", "/mnt/landing")

    config = load_pipeline(PRODUCTION)

    assert config.name == "reflex-replica"  # also the consumer group replicas share
    assert config.datahub is not None and config.datahub.server == "http://datahub-gms:8080"
    assert KafkaEventSourceConfig.model_validate(config.source.config).connection.bootstrap == (
        "broker:29092"
    )
    landing = ReflexConfig.model_validate(config.action.config).landing
    assert landing.allowed_roots == [Path("/mnt/landing")]
    assert landing.locator == "/mnt/landing/{name}/{snapshot_id}.parquet"


#: DataHub's own doc-propagation action gives each poll this long (its MAX_POLL_INTERVAL_MS)
DATAHUB_DOC_PROPAGATION_POLL_MS = 60_000
CLOSED_LOOPBACK_PORT = "127.0.0.1:9"  # discard: nothing answers, nothing leaves the machine
KAFKA_CONSUMER = confluent_kafka.DeserializingConsumer


def _consumer_config(source_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict:
    """The properties the kafka source hands librdkafka for this source block. The consumer is
    really built, so librdkafka's own checks (e.g. session timeout <= poll interval) apply."""
    captured: dict[str, Any] = {}

    class RecordingConsumer(KAFKA_CONSUMER):
        def __init__(self, conf: dict[str, Any]) -> None:
            captured.update(conf)
            super().__init__(conf)

    monkeypatch.setattr(
        kafka_event_source.confluent_kafka, "DeserializingConsumer", RecordingConsumer
    )
    monkeypatch.setenv("DATAHUB_ACTIONS_KAFKA_ENV_PROPERTIES_ENABLED", "false")
    source = KafkaEventSource.create(source_config, CTX)
    source.close()
    return captured


def test_the_production_consumer_is_not_evicted_by_a_long_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An LLM draft or a backtest runs between two polls; past max.poll.interval.ms the broker
    evicts the consumer and the event is delivered again. The kafka source's own default is
    far shorter than that work."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVER", CLOSED_LOOPBACK_PORT)
    config = load_pipeline(PRODUCTION)
    assert config.source.config is not None
    shipped = _consumer_config(config.source.config, monkeypatch)
    bare = dict(config.source.config, connection={"bootstrap": CLOSED_LOOPBACK_PORT})
    default = _consumer_config(bare, monkeypatch)

    poll = int(shipped["max.poll.interval.ms"])
    assert poll > int(default["max.poll.interval.ms"])
    assert poll >= DATAHUB_DOC_PROPAGATION_POLL_MS
    session, heartbeat = int(shipped["session.timeout.ms"]), int(shipped["heartbeat.interval.ms"])
    # Kafka's rules: heartbeats well inside the session, the session inside the poll interval
    assert 3 * heartbeat <= session <= poll
    assert shipped["auto.offset.reset"] == "latest"  # the rest of consumer_config still arrives


def test_the_poll_interval_can_be_raised_for_slower_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVER", CLOSED_LOOPBACK_PORT)
    monkeypatch.setenv("REFLEX_KAFKA_MAX_POLL_INTERVAL_MS", "900000")
    config = load_pipeline(PRODUCTION)
    assert config.source.config is not None
    assert int(_consumer_config(config.source.config, monkeypatch)["max.poll.interval.ms"]) == (
        900_000
    )


@pytest.mark.parametrize(
    ("group", "name", "target"),
    [
        ("datahub_actions.action.plugins", "reflex", ReflexAction),
        ("datahub_actions.source.plugins", "reflex-lite", LiteChangeFeedSource),
    ],
)
def test_the_plugins_are_registered(group: str, name: str, target: type) -> None:
    (entry_point,) = [e for e in entry_points(group=group) if e.name == name]
    assert entry_point.load() is target
    registry = action_registry if group.endswith("action.plugins") else event_source_registry
    assert registry.get(name) is target


def test_every_config_setting_documents_itself() -> None:
    """As datahub-actions' ConfigModels do: each field of the action's config, nested ones
    included, carries a description (the JSON schema shows it)."""
    undocumented: list[str] = []
    seen: set[type[BaseModel]] = set()

    def walk(model: type[BaseModel], where: str) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, info in model.model_fields.items():
            if not info.description:
                undocumented.append(f"{where}.{name}")
            for nested in _models_in(info.annotation):
                walk(nested, f"{where}.{name}")

    walk(ReflexConfig, "action.config")
    assert undocumented == []
    assert len(seen) >= 9  # the nested blocks were walked too


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]
