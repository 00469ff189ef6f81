"""Which covered datasets this instance sweeps, when several share a Kafka consumer group.

DataHub keys its change log by urn, and the Java client it produces with puts a keyed message
on partition ``murmur2(key) % partitions``. An instance sweeps the datasets whose change-log
partition is assigned to it: the group's live members split the estate as they split the
events, a dataset's events and its sweep land on the same instance, and when a member dies
its partitions (and so its datasets) pass to the others at the rebalance; when one joins, the
others lose some of theirs, and a sweep under way stops judging them at its next slice (their
new owner sweeps them). Each dataset is then judged once per slot across the group (a run
already judged in the slot is never judged again, whoever judged it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import KafkaException

logger = logging.getLogger(__name__)

_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (the Java client's default partitioner), as an unsigned int."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & _MASK
        k ^= k >> 24
        k = (k * m) & _MASK
        h = ((h * m) & _MASK) ^ k
    tail = length - length % 4
    if length % 4 >= 3:
        h ^= data[tail + 2] << 16
    if length % 4 >= 2:
        h ^= data[tail + 1] << 8
    if length % 4 >= 1:
        h ^= data[tail]
        h = (h * m) & _MASK
    h ^= h >> 13
    h = (h * m) & _MASK
    h ^= h >> 15
    return h


def partition_of(key: str, partitions: int) -> int:
    """The partition the Java client's default partitioner puts a message keyed ``key`` on."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


class Shards(Protocol):
    def owned(self) -> Callable[[str], bool]:
        """Which datasets are this instance's to sweep (asked at a sweep's start; a dataset
        stops being owned as soon as another instance is given it)."""
        ...

    def gained(self) -> bool:
        """Whether datasets became this instance's since the last ask (a member left), or
        came back after a sweep saw them revoked (a rebalance revokes every partition first)."""
        ...


class EveryDataset:
    """A single instance (the embedded store allows one): every dataset is its own."""

    def owned(self) -> Callable[[str], bool]:
        return lambda _urn: True

    def gained(self) -> bool:
        return False


class KafkaShards:
    """The datasets whose change-log partition the group assigned to this member's consumer.

    The assignment is learned from the consumer's rebalance callbacks, which librdkafka runs
    inside ``poll()`` on the pipeline's thread: the sweeper and the timer never call the
    consumer. confluent-kafka (2.16 on) makes a call into a consumer from a second thread wait
    until no other thread is in one, and the pipeline polls again at once when idle, so such a
    call could wait for as long as no event came.
    """

    def __init__(self, topic: str) -> None:
        self._topic = topic
        self._lock = threading.Lock()
        #: the partitions of the topic assigned, and how many it has (the callbacks set them)
        self._assignment: frozenset[int] = frozenset()
        self._partitions = 0
        #: the partitions held since the last ask without a break seen (the sweeper thread
        #: and the timer's update it)
        self._seen: frozenset[int] = frozenset()

    def listen(self, consumer: Any) -> None:
        """Have the consumer's ``subscribe`` (the kafka source's, once its pipeline runs)
        register this instance's rebalance callbacks."""
        subscribe = consumer.subscribe

        def subscribe_telling_shards(topics: list[str]) -> None:
            subscribe(
                topics,
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_revoke,
            )

        consumer.subscribe = subscribe_telling_shards

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        """Partitions given (all of them, or the ones added under cooperative rebalancing);
        the topic's partition count is read here, on the polling thread."""
        given = {tp.partition for tp in partitions if tp.topic == self._topic}
        try:
            topic = consumer.list_topics(self._topic, timeout=10).topics.get(self._topic)
            count = len(topic.partitions) if topic is not None else 0
        except KafkaException as error:  # raised in a callback, it would stop poll()
            logger.warning("reflex: cannot read the partitions of %s: %s", self._topic, error)
            count = self._partitions
        with self._lock:
            self._assignment |= given
            self._partitions = count

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        taken = {tp.partition for tp in partitions if tp.topic == self._topic}
        with self._lock:
            self._assignment -= taken

    def owned(self) -> Callable[[str], bool]:
        """The datasets of the partitions assigned now and still assigned when asked: a
        partition revoked mid-sweep (a member joined) is its new owner's to sweep. One gained
        mid-sweep is not taken up here but by the sweep :meth:`gained` then asks for."""
        with self._lock:
            assigned = self._seen = self._assignment
            partitions = self._partitions
        if not partitions or not assigned:
            logger.info("reflex: no partition of %s assigned yet: nothing to sweep", self._topic)
            return lambda _urn: False
        logger.info(
            "reflex: sweeping the datasets of partitions %s of %s (of %d)",
            ", ".join(map(str, sorted(assigned))),
            self._topic,
            partitions,
        )

        def still_owned(urn: str) -> bool:
            partition = partition_of(urn, partitions)
            if partition not in assigned:
                return False
            with self._lock:
                if partition in self._assignment:
                    return True
                self._seen -= {partition}  # given back later: gained() asks for a sweep
                return False

        return still_owned

    def gained(self) -> bool:
        with self._lock:
            gained = bool(self._assignment - self._seen)
            self._seen = self._assignment
        return gained
