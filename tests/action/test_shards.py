"""Members of one consumer group split the sweep as they split the events: by the change-log
partition of each dataset's urn."""

from __future__ import annotations

from collections.abc import Callable
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
    """A group member's consumer as KafkaShards meets it: subscribed by the kafka source, it
    runs the rebalance callbacks inside ``poll()``, and only there may it be called (from any
    other thread confluent-kafka makes a call wait while the pipeline polls)."""

    partitions: int
    assigned: list[int] = field(default_factory=list)
    callbacks: dict[str, Callable[..., None]] = field(default_factory=dict)
    polling: bool = False

    def subscribe(self, topics: list[str], **callbacks: Callable[..., None]) -> None:
        self.callbacks = callbacks

    def rebalance(self, assigned: list[int]) -> None:
        """An eager rebalance, as ``poll()`` serves it: every partition revoked, then the
        new assignment given."""
        self.polling = True
        self.callbacks["on_revoke"](self, self._listed(self.assigned))
        self.assigned = assigned
        self.callbacks["on_assign"](self, self._listed(assigned))
        self.polling = False

    def _listed(self, partitions: list[int]) -> list[TopicPartition]:
        return [
            TopicPartition(t, p)
            for t in (TOPIC, "MetadataChangeLog_Timeseries_v1")
            for p in partitions
        ]

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        assert self.polling, "called from outside poll(): it waits for the pipeline's poll"
        return SimpleNamespace(
            topics={topic: SimpleNamespace(partitions=dict.fromkeys(range(self.partitions)))}
        )

    def assignment(self) -> list[TopicPartition]:
        assert self.polling, "called from outside poll(): it waits for the pipeline's poll"
        return self._listed(self.assigned)


def listening(member: Member) -> KafkaShards:
    shards = KafkaShards(TOPIC)
    shards.listen(member)
    member.subscribe([TOPIC])  # the kafka source subscribes once its pipeline runs
    return shards


def test_two_members_split_every_dataset_and_one_takes_over_when_the_other_leaves() -> None:
    first, second = Member(4), Member(4)
    shards = listening(first), listening(second)
    first.rebalance([0, 1])
    second.rebalance([2, 3])
    owned = [shard.owned() for shard in shards]

    mine = [{d for d in DATASETS if owns(d)} for owns in owned]
    assert mine[0] and mine[1] and not mine[0] & mine[1]
    assert mine[0] | mine[1] == set(DATASETS)
    assert all(partition_of(d, 4) in (0, 1) for d in mine[0])

    assert not shards[0].gained()
    first.rebalance([0, 1, 2, 3])  # the second left: its partitions came to the first
    assert shards[0].gained() and not shards[0].gained()
    assert {d for d in DATASETS if shards[0].owned()(d)} == set(DATASETS)


def test_before_joining_the_group_a_member_owns_nothing() -> None:
    assert not any(listening(Member(4)).owned()(d) for d in DATASETS)


def test_a_partition_revoked_mid_sweep_is_no_longer_swept_and_one_given_back_is_swept_again() -> (
    None
):
    member = Member(4)
    shards = listening(member)
    member.rebalance([0, 1, 2, 3])
    owns = shards.owned()  # a sweep starts alone in the group
    assert all(owns(d) for d in DATASETS)

    member.rebalance([0, 1])  # a member joined and was given 2 and 3: they are its to sweep
    assert {d for d in DATASETS if owns(d)} == {d for d in DATASETS if partition_of(d, 4) < 2}

    # Given back (an eager rebalance revokes every partition first, or the newcomer left):
    # what the sweep skipped meanwhile is swept again.
    member.rebalance([0, 1, 2, 3])
    assert shards.gained()
