"""Several ``datahub actions`` processes in one consumer group (issue 26): the schedule's sweep
is split by each dataset's change-log partition, and when a member is killed mid-sweep the
survivor, given its partitions at the rebalance, finishes the slot. Counted in the store: every
covered dataset judged exactly once per slot, none twice, none skipped.

The MCL topics have several partitions here, and the bridge puts each message where GMS's
producer (the Java client's murmur2 partitioner) would: Reflex computes that partition itself
to know which datasets are a member's to sweep.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from datahub.metadata.schema_classes import (
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
)

from reflex_actions.action.shards import partition_of
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.controls import parse_control_spec
from reflex_actions.handlers.assertions import assertion_mcp, assertion_urn
from reflex_actions.handlers.lesson_store import lesson_term_mcp
from reflex_actions.kinds.stale_data import STALE_DATA
from reflex_actions.lessons.model import ApprovedVersion, LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.times import iso, now_ms
from reflex_actions.vocabulary import APPROVAL, COVERAGE, ROOT_CAUSE_STATUS
from tests.handlers.builders import REFLEX, STEWARD, lesson
from tests.kafka.infra import (
    VERSIONED_TOPIC,
    ActionsProcess,
    DemoFolder,
    GmsMclBridge,
    TansuBroker,
    wait_until,
)

T = TypeVar("T")
PARTITIONS = 4
#: Long enough for a takeover inside one slot: the session times out (2 s), the group
#: rebalances, the survivor's timer sees the gain (within 1 s) and sweeps what is left (~1 s).
INTERVAL_MS = 10_000
SWEPT = "urn:li:glossaryTerm:reflex.lesson.fleet-stale"
FRESHNESS = {"type": "freshness", "max_age": "26h"}
#: Enough for a sweep of a few slices (a slice is 100 datasets of the lesson's scope).
FLEET = [f"urn:li:dataset:(urn:li:dataPlatform:hive,fleet.t{n:03d},PROD)" for n in range(300)]
STALE = set(FLEET[::10])
HOUR_MS = 3600 * 1000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TansuBroker]:
    """The topics with several partitions, as a platform running several members has them."""
    tansu = TansuBroker(tmp_path / "tansu.log", partitions=PARTITIONS)
    tansu.start()
    yield tansu
    tansu.kill()


def operation(updated_ms: int) -> OperationClass:
    return OperationClass(
        timestampMillis=updated_ms,
        operationType=OperationTypeClass.INSERT,
        lastUpdatedTimestamp=updated_ms,
    )


def publish_fleet_lesson(catalog: LiteCatalog) -> None:
    """A freshness lesson (no timestamp field: judged on the last update DataHub records) as
    publishing leaves it on every dataset of the fleet: its assertion, the dataset's coverage,
    the lesson term; and each dataset's last load, three days ago on the stale ones."""
    now = now_ms()
    published = lesson(
        urn=SWEPT,
        failure_pattern=STALE_DATA,
        control=FRESHNESS,
        state=LessonState.PUBLISHED,
        published_scope=FLEET,
        gate_values={ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"},
        approved=ApprovedVersion(
            control=FRESHNESS, scope=FLEET, actor=STEWARD, at=now - HOUR_MS,
            digest=ApprovedVersion.digest_of(FRESHNESS, FLEET),
        ),
    )  # fmt: skip
    control = parse_control_spec(FRESHNESS)
    coverage = StructuredPropertiesClass(
        properties=[StructuredPropertyValueAssignmentClass(propertyUrn=COVERAGE, values=[SWEPT])]
    )
    mcps = [lesson_term_mcp(published, "fleet loads stopped", REFLEX)]
    for dataset in FLEET:
        loaded = now - (72 if dataset in STALE else 1) * HOUR_MS
        mcps += [
            assertion_mcp(published, dataset, control, REFLEX),
            acting_as(REFLEX, dataset, coverage),
            acting_as(DEFAULT_ACTOR, dataset, operation(loaded)),
        ]
    catalog.emit(mcps)


def run_id(slot: int) -> str:
    return f"scheduled-{iso(slot)}"


def slot_of(time_ms: int) -> int:
    return time_ms - time_ms % INTERVAL_MS


@dataclass(frozen=True)
class Sweep:
    """One sweep as a member logs it: the partitions it swept, then what it judged."""

    partitions: frozenset[int]
    time_ms: int
    judged: int


SWEEP_LINE = re.compile(
    r"reflex: (?:sweeping the datasets of partitions (?P<partitions>[\d, ]+) of "
    + VERSIONED_TOPIC
    + r"|no partition of (?P<none>\S+) assigned yet"
    + r"|schedule tick at (?P<time>\d+): SweepCounts\(judged=(?P<judged>\d+))"
)


def sweeps(member: ActionsProcess) -> list[Sweep]:
    """The member's finished sweeps, in order (one sweeper thread: each sweep logs what it
    owns, then its counts)."""
    done, owned = [], frozenset[int]()
    for match in SWEEP_LINE.finditer(member.log()):
        if match["partitions"]:
            owned = frozenset(int(p) for p in match["partitions"].split(", "))
        elif match["none"]:
            owned = frozenset()
        else:
            done.append(Sweep(owned, int(match["time"]), int(match["judged"])))
    return done


def in_slot(member: ActionsProcess, slot: int) -> list[Sweep]:
    return [s for s in sweeps(member) if slot_of(s.time_ms) == slot]


def datasets_of(partitions: frozenset[int]) -> set[str]:
    return {d for d in FLEET if partition_of(d, PARTITIONS) in partitions}


def runs(store: Path) -> Counter[tuple[str, str]]:
    """(assertion, run id) -> how many run events the store holds of it."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT urn, json_extract(metadata, '$.runId') FROM metadata_aspect_v2 "
            "WHERE aspect_name = 'assertionRunEvent' AND version > 0"
        ).fetchall()
    return Counter((urn, run) for urn, run in rows)


def judged_in(store: Path, slot: int, datasets: set[str] | list[str] = FLEET) -> set[str]:
    """The datasets with a run event of the slot."""
    counted = runs(store)
    return {d for d in datasets if counted[(assertion_urn(SWEPT, d), run_id(slot))]}


def incidents_b(store: Path) -> Counter[str]:
    """dataset -> incidents B raised on it."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT json_extract(metadata, '$.entities[0]') FROM metadata_aspect_v2 "
            "WHERE aspect_name = 'incidentInfo' AND version = 0 "
            "AND json_extract(metadata, '$.source.type') = 'ASSERTION_FAILURE'"
        ).fetchall()
    return Counter(dataset for (dataset,) in rows)


def assert_judged_once(store: Path, slot: int) -> None:
    """Every covered dataset has exactly one run of the slot, and no run of any slot was
    ever written twice."""
    counted = runs(store)
    twice = {key: n for key, n in counted.items() if n > 1}
    assert not twice, f"judged more than once: {twice}"
    assert judged_in(store, slot) == set(FLEET)


def test_the_bridge_puts_a_dataset_on_the_partition_gms_would(
    demo: DemoFolder, bridge: GmsMclBridge
) -> None:
    """librdkafka's murmur2 partitioner (GMS's, the Java client's default) against Reflex's
    own murmur2: a dataset's messages land where Reflex says they do."""
    now = now_ms()
    demo.catalog.emit([acting_as(DEFAULT_ACTOR, d, operation(now)) for d in FLEET[:64]])
    bridge.wait_idle()

    landed = {d: bridge.partitions[d] for d in FLEET[:64]}
    assert landed == {d: {partition_of(d, PARTITIONS)} for d in FLEET[:64]}
    assert set().union(*landed.values()) == set(range(PARTITIONS))


def test_two_members_split_the_sweep_and_a_survivor_finishes_a_killed_members_slot(
    demo: DemoFolder, bridge: GmsMclBridge, make_actions: Callable[..., ActionsProcess]
) -> None:
    publish_fleet_lesson(demo.catalog)
    bridge.wait_idle()  # the estate is on the topics before the members start at 'latest'
    group = f"reflex-group-{uuid.uuid4().hex[:8]}"
    members = [
        make_actions(
            name=group,
            debug=True,  # the sweeps' lines
            offset_reset="latest",
            schedule_interval=f"{INTERVAL_MS // 1000}s",
        )
        for _ in range(2)
    ]
    for member in members:
        member.start()

    def context() -> str:
        return "\n".join(m.log_tail(25) for m in members)

    def wait(condition: Callable[[], T], what: str, timeout: float) -> T:
        return wait_until(condition, timeout=timeout, what=what, context=context, interval=0.05)

    # A slot both members swept in disjoint halves of the partitions (the first, unless one
    # joined mid-slot): each judged the datasets of its partitions, and only those.
    def split_slot() -> tuple[int, list[frozenset[int]]] | None:
        for slot in sorted({slot_of(s.time_ms) for m in members for s in sweeps(m)}):
            owned = [frozenset().union(*(s.partitions for s in in_slot(m, slot))) for m in members]
            if (
                all(owned)
                and owned[0].isdisjoint(owned[1])
                and owned[0] | owned[1] == set(range(PARTITIONS))
                and judged_in(demo.store, slot) == set(FLEET)
            ):
                return slot, owned
        return None

    first, owned = wait(split_slot, "a slot swept by both members", timeout=40)
    judged = [sum(s.judged for s in in_slot(m, first)) for m in members]
    assert judged == [len(datasets_of(p)) for p in owned] and all(judged)
    assert_judged_once(demo.store, first)
    assert incidents_b(demo.store) == Counter(STALE)

    # The next slot: the second member is killed once it has judged some of its datasets.
    survivor, victim = members
    second, theirs = slot_of(now_ms()) + INTERVAL_MS, datasets_of(owned[1])
    wait(
        lambda: judged_in(demo.store, second, theirs),
        "the second member's first run events of the next slot",
        timeout=(second - now_ms()) / 1000 + 10,
    )
    victim.kill9()
    judged_by_victim = judged_in(demo.store, second, theirs)
    assert 0 < len(judged_by_victim) < len(theirs), "not killed mid-sweep"

    # The survivor is given its partitions and finishes the slot: nothing twice, none left.
    wait(
        lambda: judged_in(demo.store, second) == set(FLEET),
        "the survivor to judge the rest of the slot",
        timeout=(second + INTERVAL_MS - now_ms()) / 1000,
    )
    assert_judged_once(demo.store, second)
    took_over = in_slot(survivor, second)
    assert took_over[-1].partitions == set(range(PARTITIONS))
    assert sum(s.judged for s in took_over) == len(FLEET) - len(judged_by_victim)
    assert incidents_b(demo.store) == Counter(STALE)
    assert survivor.alive and not bridge.errors
