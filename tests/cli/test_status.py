"""``status``: how many events the pipeline's source has still to deliver, read from the source's
own state (the reflex-lite offset file, the kafka consumer group) without moving it."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import StatusClass

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.status import status_command
from tests.kafka.infra import LIBRDKAFKA_LOG, MCL_TOPICS, TansuBroker, wait_until
from tests.source.test_lite_change_feed import drain, feed

DATASET = "urn:li:dataset:(urn:li:dataPlatform:duckdb,finance.payments,PROD)"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LiteCatalog]:
    """A store with Reflex's definitions in it and no pipeline ever run on it."""
    catalog = LiteCatalog(tmp_path / "reflex.db")
    catalog.emit(bootstrap_mcps())
    yield catalog
    catalog.close()


def status(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(status_command, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


def write_dataset(catalog: LiteCatalog, removed: bool) -> None:
    catalog.emit([MetadataChangeProposalWrapper(entityUrn=DATASET, aspect=StatusClass(removed))])


def test_a_fresh_store_is_behind_by_every_event_the_feed_then_delivers(
    store: LiteCatalog,
) -> None:
    code, before = status("--store", str(store.path))
    delivered = drain(feed(store))
    caught_up_code, after = status("--store", str(store.path))

    assert code == 1
    assert before["behind"] == len(delivered) > 0
    assert before["offset"] == 0 and not before["caught_up"]
    assert before["newest_row"] == delivered[-1].meta["lite"]["rowid"]
    assert caught_up_code == 0
    assert after["caught_up"] and after["behind"] == 0
    assert after["offset"] == after["newest_row"] == before["newest_row"]


def test_a_write_after_catching_up_puts_it_one_event_behind(store: LiteCatalog) -> None:
    drain(feed(store))
    write_dataset(store, removed=False)

    code, result = status("--store", str(store.path))
    line = CliRunner().invoke(status_command, ["--store", str(store.path)]).output
    one = drain(feed(store))

    assert (code, result["behind"]) == (1, 1)
    assert line.startswith(f"{store.path}: 1 event behind (newest row ")
    assert result["newest_row"] == one[0].meta["lite"]["rowid"] > result["offset"]
    assert len(one) == 1


def test_a_running_source_is_seen_and_its_out_of_order_acks_count_as_delivered(
    store: LiteCatalog,
) -> None:
    drain(feed(store))
    for removed in (False, True, False):
        write_dataset(store, removed)
    source = feed(store)
    first, second, third = (event for _, event in zip(range(3), source.events(), strict=False))
    source.ack(third)
    source.ack(second)

    code, running = status("--store", str(store.path))
    source.ack(first)
    source.close()
    stopped_code, stopped = status("--store", str(store.path))

    assert code == 1
    assert running["running"] and running["pid"] == os.getpid()
    assert (running["acked"], running["behind"]) == (2, 1)
    assert running["offset"] == first.meta["lite"]["rowid"] - 1
    assert stopped_code == 0
    assert not stopped["running"] and stopped["pid"] is None
    assert (stopped["acked"], stopped["behind"]) == (0, 0)


def test_a_corrupt_offset_file_is_bad_input_naming_the_file(store: LiteCatalog) -> None:
    offset_file = Path(f"{store.path}.reflex-offset")
    offset_file.write_text('{"offset": 3, "acked": [2]}', encoding="utf-8")

    result = CliRunner().invoke(status_command, ["--store", str(store.path)])

    assert result.exit_code == 2
    assert f"unreadable offset file {offset_file}" in result.output
    assert "'acked' must be a list of Lite rowids above 'offset'" in result.output


def test_an_offset_file_past_the_end_of_its_store_is_bad_input(store: LiteCatalog) -> None:
    offset_file = Path(f"{store.path}.reflex-offset")
    offset_file.write_text('{"offset": 1000000, "acked": []}', encoding="utf-8")

    result = CliRunner().invoke(status_command, ["--store", str(store.path)])

    assert result.exit_code == 2
    assert f"offset file {offset_file} is past the end of {store.path}" in result.output


def test_no_store_there_is_bad_input_and_leaves_no_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(status_command, ["--store", str(tmp_path / "none.db")])

    assert result.exit_code == 2
    assert f"DataHub Lite store {tmp_path / 'none.db'} does not exist" in result.output
    assert list(tmp_path.iterdir()) == []


def write_pipeline(path: Path, source: dict[str, Any], name: str = "status-test") -> Path:
    pipeline = {"name": name, "source": source, "action": {"type": "reflex", "config": {}}}
    path.write_text(yaml.safe_dump(pipeline), encoding="utf-8")
    return path


def test_the_pipeline_file_names_the_offset_file_and_where_an_unrun_feed_starts(
    store: LiteCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offset_file = tmp_path / "elsewhere.offset"
    monkeypatch.setenv("STATUS_TEST_STORE", str(store.path))
    source = {"store": "${STATUS_TEST_STORE}", "offset_file": str(offset_file)}
    beginning = write_pipeline(
        tmp_path / "beginning.yaml", {"type": "reflex-lite", "config": source}
    )
    latest = write_pipeline(
        tmp_path / "latest.yaml",
        {"type": "reflex-lite", "config": {**source, "start_from": "latest"}},
    )
    drain(feed(store))  # delivers every row, on the default offset file only

    from_start = status("-c", str(beginning))
    from_latest = status("-c", str(latest))

    assert from_start[0] == 1
    assert from_start[1]["offset_file"] == str(offset_file)
    assert from_start[1]["behind"] == len(drain(feed(store, offset_file=str(tmp_path / "x"))))
    assert from_latest[0] == 0 and from_latest[1]["behind"] == 0
    assert not offset_file.exists()  # status pins nothing: the source does when it starts


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"type": "kafka-ng", "config": {}}, "source type 'kafka-ng' is not one status reads"),
        (
            {"type": "reflex-lite", "config": {"batch_size": 0}},
            "source.config.store: Field required",
        ),
    ],
)
def test_a_source_status_cannot_read_is_bad_input(
    tmp_path: Path, source: dict[str, Any], message: str
) -> None:
    pipeline = write_pipeline(tmp_path / "pipeline.yaml", source)

    code, result = status("-c", str(pipeline))

    assert code == 2
    assert message in result["error"]


# --- the kafka source ---------------------------------------------------------------------------
@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TansuBroker]:
    tansu = TansuBroker(tmp_path / "tansu.log")
    tansu.start(topics=MCL_TOPICS)
    yield tansu
    tansu.kill()


def kafka_pipeline(path: Path, broker: TansuBroker, group: str) -> Path:
    """The kafka source as action_configs/reflex.yaml configures it, on the test broker."""
    connection = {"bootstrap": broker.bootstrap, "schema_registry_url": "http://127.0.0.1:9/"}
    routes = {"mcl": MCL_TOPICS[0], "mcl_timeseries": MCL_TOPICS[1]}
    source = {"connection": connection, "topic_routes": routes}
    return write_pipeline(path, {"type": "kafka", "config": source}, name=group)


def produce_one_by_one(broker: TansuBroker, topic: str, count: int) -> None:
    """Messages in batches of one each: tansu's watermark is right for those."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "logger": LIBRDKAFKA_LOG})
    for number in range(count):
        producer.produce(topic, value=b"m%d" % number)
        producer.flush(10)


def group_consumer(broker: TansuBroker, group: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 500,
            "logger": LIBRDKAFKA_LOG,
        }
    )
    consumer.subscribe([topic])
    return consumer


def consume_and_commit(consumer: Consumer, count: int) -> None:
    for _ in range(count):
        message = wait_until(lambda: consumer.poll(0.2), timeout=20, what="a message")
        assert message.error() is None
        consumer.commit(message=message, asynchronous=False)


def test_the_kafka_groups_lag_is_its_committed_offset_below_the_watermark(
    broker: TansuBroker, tmp_path: Path
) -> None:
    group = f"status-{uuid.uuid4().hex[:8]}"
    pipeline = kafka_pipeline(tmp_path / "reflex.yaml", broker, group)
    produce_one_by_one(broker, MCL_TOPICS[0], 3)
    consumer = group_consumer(broker, group, MCL_TOPICS[0])
    consume_and_commit(consumer, 2)

    code, consuming = status("-c", str(pipeline))
    consume_and_commit(consumer, 1)
    consumer.close()
    caught_up_code, idle = status("-c", str(pipeline))

    assert code == 1
    assert consuming["group"] == group and consuming["behind"] == 1
    assert consuming["partitions"] == [
        {"topic": MCL_TOPICS[0], "partition": 0, "committed": 2, "high_watermark": 3, "lag": 1},
        {"topic": MCL_TOPICS[1], "partition": 0, "committed": None, "high_watermark": 0, "lag": 0},
    ]
    assert consuming["running"] is True
    assert caught_up_code == 0
    assert idle["caught_up"] and idle["behind"] == 0 and idle["running"] is False
    assert idle["partitions"][0]["committed"] == 3


def test_a_watermark_below_the_brokers_log_makes_the_lag_unknown(
    broker: TansuBroker, tmp_path: Path
) -> None:
    """tansu counts a batch of several messages as one in its high watermark."""
    group = f"status-{uuid.uuid4().hex[:8]}"
    pipeline = kafka_pipeline(tmp_path / "reflex.yaml", broker, group)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 100, "logger": LIBRDKAFKA_LOG}
    )
    for number in range(4):
        producer.produce(MCL_TOPICS[0], value=b"m%d" % number)
    producer.flush(10)

    code, result = status("-c", str(pipeline))
    human = CliRunner().invoke(status_command, ["-c", str(pipeline)])

    assert code == 1
    assert result["behind"] is None and result["caught_up"] is None
    assert result["partitions"][0]["lag"] is None
    assert result["partitions"][1]["lag"] == 0
    assert "lag unknown" in human.output and f"{MCL_TOPICS[0]}[0]" in human.output


def test_an_unreachable_broker_is_bad_input_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("reflex_actions.source.kafka_lag.BROKER_TIMEOUT_SECONDS", 5.0)
    closed = TansuBroker(tmp_path / "never-started.log")  # a free port nothing listens on
    pipeline = kafka_pipeline(tmp_path / "reflex.yaml", closed, "status-unreachable")

    result = CliRunner().invoke(status_command, ["-c", str(pipeline)])

    assert result.exit_code == 2
    assert result.output == (
        f"error: cannot read consumer group status-unreachable at {closed.bootstrap}: "
        "Failed to get metadata: Local: Broker transport failure\n"
    )
