"""Stale data, end to end on the embedded store: a lesson learned from a settlement export that
stopped is published on its siblings, and the schedule (cron's ``evaluate --due``, the embedded
source's idle ticks, the action's own timer beside Kafka) raises incident B where a loader has
stopped since, once per staleness, judging each control once per interval."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from datahub.metadata.schema_classes import AssertionRunEventClass

from reflex_actions.action.reflex_action import SCHEDULE_ROUTE, ReflexAction
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.main import cli
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.run import Demo
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.kinds.stale_data import STALE_DATA
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.times import iso
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.loop.store import (
    active_incident,
    demo_with_resolved,
    history,
    incidents_b,
    land,
    store_of,
    write_estate_snapshot,
)

STALE = "urn:li:incident:settlements-stale"
SETTLEMENTS, PAYOUTS, REFUNDS = (
    dataset_urn(name) for name in ("finance.card_settlements", "finance.payouts", "finance.refunds")
)
TIME_FIELDS = {
    "finance.card_settlements": "settled_at",
    "finance.payouts": "paid_at",
    "finance.refunds": "refunded_at",
}
HOUR = 3600 * 1000


def _rows(name: str, newest: datetime) -> dict[str, list[object]]:
    return {TIME_FIELDS[name]: [newest - timedelta(minutes=m) for m in (0, 30, 90)]}


@dataclass
class Published:
    demo: Demo
    lesson: Lesson
    landing: Path

    @property
    def store(self) -> Path:
        return store_of(self.demo.workdir)

    def land_at(self, name: str, newest: datetime) -> None:
        """Today's snapshot of ``name``, whose newest row is ``newest``, lands."""
        day = f"today-{name}"
        path = write_estate_snapshot(
            self.landing / name / f"{day}.parquet", name, _rows(name, newest)
        )
        land(self.demo, dataset_urn(name), path, day)
        self.demo.react()

    def pipeline_file(self) -> Path:
        path = self.demo.workdir / "pipeline.yaml"
        path.write_text(yaml.safe_dump(self.demo.config))
        return path


@pytest.fixture
def published(tmp_path: Path) -> Iterator[Published]:
    """The settlement export stopped on 2026-09-10 (two stale days); payouts and refunds load
    every morning. The lesson is confirmed as drafted and approved on its recommended scope."""
    workdir = tmp_path / "demo"
    snapshots = workdir / "snapshots"
    for name in TIME_FIELDS:
        for day in range(1, 13):
            loaded = 9 if name == "finance.card_settlements" and day in (10, 11) else day
            write_estate_snapshot(
                snapshots / name / f"2026-09-{day:02d}.parquet",
                name,
                _rows(name, datetime(2026, 9, loaded, 8)),
            )
    (snapshots / "finance.card_settlements" / "labels.yaml").write_text(
        yaml.safe_dump(
            {"failures": [{"snapshot": d, "incident": STALE} for d in ("2026-09-10", "2026-09-11")]}
        )
    )
    incident = active_incident(
        STALE,
        SETTLEMENTS,
        "Stale card settlements",
        "The settlement export silently stopped; finance saw stale settlements on 2026-09-10.",
    )
    demo = demo_with_resolved(workdir, incident, "The export job now alerts when it fails.")
    try:
        lesson = demo.lesson(STALE)
        assert lesson.failure_pattern == STALE_DATA
        assert lesson.control == {
            "type": "freshness",
            "max_age": "30h",  # a day between loads (above the 16h lag), plus 25%
            "timestamp_field": "settled_at",
        }
        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = demo.lesson(STALE)
        assert lesson.state is LessonState.PUBLISHED
        assert {PAYOUTS, REFUNDS} <= set(lesson.published_scope)
        yield Published(demo, lesson, snapshots / "landing")
    finally:
        demo.catalog.close()


def _evaluate(pipeline: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    import json

    result = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(pipeline), "--json", *extra])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)


def test_cron_raises_incident_b_once_per_staleness_and_judges_once_per_slot(
    published: Published,
) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    published.land_at("finance.refunds", now - timedelta(hours=1))
    published.land_at("finance.payouts", now - timedelta(days=3))  # its loader stopped
    pipeline = published.pipeline_file()

    code, counts = _evaluate(pipeline)
    assert code == 1
    assert counts["failed"] == 1
    [(urn, info)] = incidents_b(published.store).items()
    assert info.entities == [PAYOUTS]
    assert "3d" in (info.description or "") and published.lesson.incident in (
        info.description or ""
    )
    payout_runs = history(
        published.store, assertion_urn(published.lesson.urn, PAYOUTS), AssertionRunEventClass
    )
    refund_runs = history(
        published.store, assertion_urn(published.lesson.urn, REFUNDS), AssertionRunEventClass
    )
    assert [r.result.type for _, r in refund_runs] == ["SUCCESS"]  # type: ignore[union-attr]
    assert payout_runs[-1][1].result.nativeResults["measured_max_age_seconds"] == "108000"  # type: ignore[union-attr,index]

    # the same slot again: nothing is due, nothing is written
    code, again = _evaluate(pipeline)
    assert (code, again["judged"], again["failed"]) == (0, 0, 0)
    assert (
        len(
            history(
                published.store,
                assertion_urn(published.lesson.urn, PAYOUTS),
                AssertionRunEventClass,
            )
        )
        == 1
    )

    # the next slots: judged again, still stale, still the one incident B
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    code, next_slot = _evaluate(pipeline, "--as-of", later)
    assert code == 1 and next_slot["judged"] == again["skipped"]
    assert list(incidents_b(published.store)) == [urn]
    assert (
        len(
            history(
                published.store,
                assertion_urn(published.lesson.urn, PAYOUTS),
                AssertionRunEventClass,
            )
        )
        == 2
    )


def test_a_dataset_without_a_landed_snapshot_is_an_error_run_not_an_incident(
    published: Published,
) -> None:
    published.land_at("finance.refunds", datetime.now(UTC).replace(tzinfo=None))
    code, counts = _evaluate(published.pipeline_file())
    assert code == 0 and counts["failed"] == 0 and counts["errors"] >= 1
    [(_, run)] = history(
        published.store, assertion_urn(published.lesson.urn, PAYOUTS), AssertionRunEventClass
    )
    assert run.result is not None and run.result.type == "ERROR"
    assert "no landed snapshot" in (run.result.error.properties or {})["message"]  # type: ignore[union-attr]
    assert incidents_b(published.store) == {}


def test_a_time_before_the_approval_judges_nothing_and_names_the_lessons_not_yet_in_force(
    published: Published,
) -> None:
    since = published.lesson.in_force_since
    assert since is not None
    before, pipeline = iso(since - HOUR), published.pipeline_file()

    code, counts = _evaluate(pipeline, "--as-of", before)
    assert (code, counts["judged"], counts["skipped"]) == (0, 0, 0)
    not_in_force = {"lesson": published.lesson.urn, "in_force_since": iso(since)}
    assert counts["not_in_force"] == [not_in_force]
    text = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(pipeline), "--as-of", before])
    assert (
        f"not judged: {published.lesson.urn} was not yet published at {before} "
        f"(in force since {iso(since)})"
    ) in text.output

    code, counts = _evaluate(pipeline, "--as-of", iso(since + HOUR))
    assert counts["judged"] >= 1 and counts["not_in_force"] == []


def test_the_embedded_source_ticks_when_idle(published: Published) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    published.land_at("finance.payouts", now - timedelta(days=2))
    assert incidents_b(published.store) == {}  # a landing does not judge staleness
    published.demo.config["source"]["config"]["tick_interval_seconds"] = 3600
    published.demo.react()
    assert [info.entities for info in incidents_b(published.store).values()] == [[PAYOUTS]]
    assert published.demo.report.routes[SCHEDULE_ROUTE].acted == 1


def test_beside_kafka_the_actions_timer_ticks(published: Published) -> None:
    published.land_at("finance.payouts", datetime.now(UTC).replace(tzinfo=None) - timedelta(days=2))
    config = ReflexConfig.model_validate(published.demo.config["action"]["config"])
    action = ReflexAction(config, LiteCatalog(published.store), timer=True)
    try:
        deadline = time.monotonic() + 30
        while action.get_report().routes[SCHEDULE_ROUTE].seen == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        action.close()
    assert action.get_report().routes[SCHEDULE_ROUTE].seen == 1  # one tick at the start
    assert [info.entities for info in incidents_b(published.store).values()] == [[PAYOUTS]]


def test_without_a_schedule_the_cli_says_what_to_set(published: Published, tmp_path: Path) -> None:
    published.demo.config["action"]["config"].pop("schedule")
    result = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(published.pipeline_file())])
    assert result.exit_code == 2 and "schedule.interval" in result.output
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n" * 3)
    result = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(bomb)])
    assert result.exit_code == 2 and str(bomb) in result.output


def test_a_server_pipeline_without_its_datahub_block_is_bad_input(tmp_path: Path) -> None:
    pipeline = tmp_path / "server.yaml"
    pipeline.write_text(
        yaml.safe_dump({"action": {"type": "reflex", "config": {"schedule": {"interval": "1h"}}}})
    )
    result = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(pipeline)])
    assert result.exit_code == 2 and "datahub: {server" in result.output
