"""How far the datahub-actions ``kafka`` source's consumer group stands behind its topics.

The pipeline's consumer group is its name; its lag on a partition is the high watermark less the
group's committed offset (where it resumes). A broker's watermark is only trusted once the log
agrees with it: the reader asks for the message at the watermark, and one that exists there (and
is still beyond the watermark when it is read again) means the broker counts its log wrongly, as
tansu does after a batch of several messages. The lag is then unknown, and said to be.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException
from confluent_kafka import TopicPartition as Partition
from confluent_kafka.admin import AdminClient
from datahub_actions.plugin.source.kafka.kafka_event_source import (
    DEFAULT_TOPIC_ROUTES,
    KafkaEventSourceConfig,
    kafka_consumer_config_from_env,
)

from reflex_actions.bounded import shorten
from reflex_actions.errors import ReflexError

#: librdkafka's own log lines (connection refused, ...): kept from stderr unless logging is set
#: up, since the command reports what failed in one line of its own.
LIBRDKAFKA_LOG = logging.getLogger(f"{__name__}.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())

#: Longest wait for one answer from the broker (seconds).
BROKER_TIMEOUT_SECONDS = 10.0

#: auto.offset.reset values that start a group with no committed offset at the oldest message.
_FROM_EARLIEST = frozenset({"earliest", "smallest", "beginning"})

#: Group states in which the group has members: a pipeline consumes.
_ACTIVE_STATES = frozenset(
    {
        ConsumerGroupState.STABLE,
        ConsumerGroupState.PREPARING_REBALANCING,
        ConsumerGroupState.COMPLETING_REBALANCING,
    }
)


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    #: where the group resumes; None: it has committed no offset there
    committed: int | None
    #: the partition's high watermark as the broker reports it
    high_watermark: int
    #: messages the group has still to read; None when the broker's watermark is wrong
    lag: int | None


@dataclass(frozen=True)
class GroupLag:
    group: str
    bootstrap: str
    partitions: tuple[PartitionLag, ...]
    #: whether the group has members now; None if the broker does not say
    running: bool | None

    @property
    def behind(self) -> int | None:
        """Messages the group has still to read, None if any partition's lag is unknown."""
        lags = [partition.lag for partition in self.partitions]
        return None if None in lags else sum(lag for lag in lags if lag is not None)


def topics_of(config: KafkaEventSourceConfig) -> list[str]:
    """The topics the kafka source subscribes to (its ``_configured_topics``)."""
    return list(dict.fromkeys((config.topic_routes or DEFAULT_TOPIC_ROUTES).values()))


def group_lag(group: str, config: KafkaEventSourceConfig) -> GroupLag:
    """The lag of consumer group ``group`` on the topics the source ``config`` reads; it joins
    no group and commits nothing. ReflexError if the broker cannot be asked."""
    bootstrap = config.connection.bootstrap
    recipe = config.connection.consumer_config
    client: dict[str, Any] = {
        **{k: v for k, v in kafka_consumer_config_from_env().items() if k not in recipe},
        **recipe,
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "logger": LIBRDKAFKA_LOG,
    }
    from_earliest = str(client.get("auto.offset.reset", "latest")).lower() in _FROM_EARLIEST
    consumer = Consumer(client)
    try:
        partitions = _partitions(consumer, topics_of(config), bootstrap)
        committed = consumer.committed(partitions, timeout=BROKER_TIMEOUT_SECONDS)
        lags = []
        for partition in committed:
            low, high = consumer.get_watermark_offsets(
                partition, timeout=BROKER_TIMEOUT_SECONDS, cached=False
            )
            resumes = partition.offset if partition.offset >= 0 else low if from_earliest else high
            lags.append(
                PartitionLag(
                    partition.topic,
                    partition.partition,
                    partition.offset if partition.offset >= 0 else None,
                    high,
                    max(high - resumes, 0),
                )
            )
        untrusted = _beyond_watermark(consumer, lags)
    except KafkaException as error:
        reason = error.args[0].str() if isinstance(error.args[0], KafkaError) else str(error)
        raise ReflexError(
            f"cannot read consumer group {shorten(group)} at {shorten(bootstrap)}: "
            f"{shorten(reason, 200)}"
        ) from None
    finally:
        consumer.close()
    return GroupLag(
        group,
        bootstrap,
        tuple(
            PartitionLag(p.topic, p.partition, p.committed, p.high_watermark, None)
            if (p.topic, p.partition) in untrusted
            else p
            for p in lags
        ),
        _running(client, group),
    )


def _partitions(consumer: Consumer, topics: Iterable[str], bootstrap: str) -> list[Partition]:
    found = []
    for topic in topics:
        metadata = consumer.list_topics(topic, timeout=BROKER_TIMEOUT_SECONDS).topics[topic]
        if metadata.error is not None:
            raise ReflexError(
                f"topic {shorten(topic)} at {shorten(bootstrap)}: {metadata.error.str()}"
            )
        found += [Partition(topic, partition) for partition in sorted(metadata.partitions)]
    return found


def _beyond_watermark(consumer: Consumer, lags: list[PartitionLag]) -> set[tuple[str, int]]:
    """The partitions holding a message at or past their reported high watermark."""
    consumer.assign([Partition(p.topic, p.partition, p.high_watermark) for p in lags])
    pending = {(p.topic, p.partition): p.high_watermark for p in lags}
    beyond = set()
    deadline = time.monotonic() + BROKER_TIMEOUT_SECONDS
    while pending and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        key = (message.topic(), message.partition())
        error = message.error()
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            raise KafkaException(error)
        if key not in pending:
            continue
        del pending[key]
        if error is None:
            _, high = consumer.get_watermark_offsets(
                Partition(*key), timeout=BROKER_TIMEOUT_SECONDS, cached=False
            )
            if high <= message.offset():  # not just written after the watermark was read
                beyond.add(key)
    if pending:
        raise KafkaException(
            KafkaError(KafkaError._TIMED_OUT, "no answer at the end of " + str(sorted(pending)))
        )
    return beyond


def _running(client: dict[str, Any], group: str) -> bool | None:
    admin = AdminClient(
        {k: v for k, v in client.items() if k not in ("group.id", "enable.partition.eof")}
    )
    try:
        description = admin.describe_consumer_groups([group])[group].result(
            timeout=BROKER_TIMEOUT_SECONDS
        )
    except KafkaException:
        return None
    if description.state in _ACTIVE_STATES:
        return True
    if description.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
        return False
    return None
