"""Members of one consumer group split the sweep as they split the events: by the change-log
partition of each dataset's urn."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from confluent_kafka import TopicPartition

from reflex_actions.action.shards import KafkaShards, murmur2, partition_of

TOPIC = "MetadataChangeLog_Versioned_v1"
DATASETS = [f"urn:li:dataset:(urn:li:dataPlatform:hive,db.t{n},PROD)" for n in range(200)]


def test_murmur2_is_the_java_clients() -> None:
    """Kafka's own test vectors (clients/.../UtilsTest.java): the hash as a signed int."""
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    for data, expected in vectors.items():
        assert murmur2(data) - (1 << 32 if murmur2(data) >= 1 << 31 else 0) == expected


@dataclass
class Member:
    """What KafkaShards asks of a consumer: its assignment and the topic's partitions."""

    partitions: int
    assigned: list[int] = field(default_factory=list)

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in self.assigned]

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        return SimpleNamespace(
            topics={topic: SimpleNamespace(partitions=dict.fromkeys(range(self.partitions)))}
        )


def test_two_members_split_every_dataset_and_one_takes_over_when_the_other_leaves() -> None:
    first, second = Member(4, [0, 1]), Member(4, [2, 3])
    shards = KafkaShards(first, TOPIC), KafkaShards(second, TOPIC)
    owned = [shard.owned() for shard in shards]

    mine = [{d for d in DATASETS if owns(d)} for owns in owned]
    assert mine[0] and mine[1] and not mine[0] & mine[1]
    assert mine[0] | mine[1] == set(DATASETS)
    assert all(partition_of(d, 4) in (0, 1) for d in mine[0])

    assert not shards[0].gained()
    first.assigned = [0, 1, 2, 3]  # the second left: its partitions came to the first
    assert shards[0].gained() and not shards[0].gained()
    assert {d for d in DATASETS if shards[0].owned()(d)} == set(DATASETS)


def test_before_joining_the_group_a_member_owns_nothing() -> None:
    assert not any(KafkaShards(Member(4), TOPIC).owned()(d) for d in DATASETS)
