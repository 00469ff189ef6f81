"""Which covered datasets this instance sweeps, when several share a Kafka consumer group.

DataHub keys its change log by urn, and the Java client it produces with puts a keyed message
on partition ``murmur2(key) % partitions``. An instance sweeps the datasets whose change-log
partition is assigned to it: the group's live members split the estate as they split the
events, a dataset's events and its sweep land on the same instance, and when a member dies
its partitions (and so its datasets) pass to the others at the rebalance. Each dataset is then
judged once per slot across the group (a run already judged in the slot is never judged again,
whoever judged it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

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
        """Which datasets are this instance's to sweep now (read once per sweep)."""
        ...

    def gained(self) -> bool:
        """Whether datasets became this instance's since the last ask (a member left)."""
        ...


class EveryDataset:
    """A single instance (the embedded store allows one): every dataset is its own."""

    def owned(self) -> Callable[[str], bool]:
        return lambda _urn: True

    def gained(self) -> bool:
        return False


class KafkaShards:
    """The datasets whose change-log partition the consumer is assigned."""

    def __init__(self, consumer: Any, topic: str) -> None:
        self._consumer = consumer
        self._topic = topic
        self._seen: frozenset[int] = frozenset()

    def _assigned(self) -> frozenset[int]:
        return frozenset(
            tp.partition for tp in self._consumer.assignment() if tp.topic == self._topic
        )

    def owned(self) -> Callable[[str], bool]:
        topic = self._consumer.list_topics(self._topic, timeout=10).topics.get(self._topic)
        partitions = len(topic.partitions) if topic is not None else 0
        assigned = self._seen = self._assigned()
        if not partitions or not assigned:
            logger.info("reflex: no partition of %s assigned yet: nothing to sweep", self._topic)
            return lambda _urn: False
        return lambda urn: partition_of(urn, partitions) in assigned

    def gained(self) -> bool:
        assigned = self._assigned()
        gained = bool(assigned - self._seen)
        self._seen = assigned
        return gained
