"""The stale-data kind: ``freshness`` passes the kind conformance suite, judges a table's age
as of a time (the CLI's ``--as-of``, each snapshot's time in a backtest, the schedule's slot),
on the newest value of a column or on the last update DataHub records, and is drafted from the
history's lags without peeking."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner

from reflex_actions.backtest import backtest, load_history
from reflex_actions.backtest.history import HistoryError
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.cli.main import cli
from reflex_actions.controls import dump_control_line, parse_control_spec
from reflex_actions.errors import ControlSpecError, SnapshotError
from reflex_actions.executor import run_control, run_control_on_recorded
from reflex_actions.kinds.stale_data import STALE_DATA, discover_freshness, snapshot_lags
from reflex_actions.lessons.model import IncidentText
from reflex_actions.similarity import SimilarityQuery, resolve_similar_assets
from reflex_actions.sql import RecordedFacts
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from reflex_actions.times import parse_instant
from tests.conformance.control_cases import ControlCase
from tests.conftest import write_snapshot

FRESH = datetime(2026, 1, 3, 12, 0)
OLD = datetime(2025, 12, 1, 8, 30)
AS_OF = datetime(2026, 1, 4)
#: a history table's open end: never a load, however new it looks
OPEN_END = datetime(9999, 12, 31)

FRESHNESS = ControlCase(
    type_name="freshness",
    columns={"ts": "updated_at", "id": "order_id"},
    make_spec=lambda c: {"type": "freshness", "max_age": "26h", "timestamp_field": c["ts"]},
    # fresh as of the case's time, and (its 2026-01-03 rows being ahead then) as of the end of
    # 2026-01-01 too; 30 minutes ahead is within the 1h tolerance
    passing_rows=[
        {"ts": ts, "id": i}
        for i, ts in enumerate(
            [FRESH - timedelta(hours=h) for h in range(4)]
            + [datetime(2026, 1, 1, 23), AS_OF + timedelta(minutes=30), OPEN_END]
        )
    ],
    failing_rows=[
        {"ts": ts, "id": i}
        for i, ts in enumerate(
            [OLD - timedelta(hours=h) for h in range(3)] + [AS_OF + timedelta(days=2), OPEN_END]
        )
    ],
    expected_violations=1,
    expected_first_sample={
        "newest": "2025-12-01T08:30:00Z",
        "as_of": "2026-01-04T00:00:00Z",
        "max_age_seconds": 93600,
        "future_values_ignored": 2,
    },
    invalid_specs=[
        ({"type": "freshness"}, "max_age"),
        ({"type": "freshness", "max_age": 26}, "duration with a unit"),
        ({"type": "freshness", "max_age": "26"}, "is not a duration"),
        ({"type": "freshness", "max_age": "0h"}, "above 0"),
        ({"type": "freshness", "max_age": "4000d"}, "at most 3650d"),
        ({"type": "freshness", "max_age": "1h", "timestamp_field": ""}, "empty"),
        ({"type": "freshness", "max_age": "1h", "future_tolerance": 30}, "future_tolerance is"),
        ({"type": "freshness", "max_age": "1h", "future_tolerance": "soon"}, "is not a duration"),
        ({"type": "freshness", "max_age": "1h", "future_tolerance": "0m"}, "above 0"),
    ],
    as_of="2026-01-04T00:00:00Z",
)


class TestFreshnessControl(BaseLessonKindConformance):
    kind_pattern = STALE_DATA
    incident = IncidentText(
        urn="urn:li:incident:stale",
        title="Stale data in sales.orders",
        description="The loader silently stopped on Friday; dashboards showed stale numbers.",
    )
    control_case = FRESHNESS
    renaming: ClassVar[dict[str, str] | None] = {"updated_at": "loaded_at"}

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        def ds(name: str, *fields: tuple[str, str], upstreams: tuple[str, ...] = ()) -> Any:
            return DatasetContext(
                urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
                name=name,
                platform="snowflake",
                domain="urn:li:domain:sales",
                fields=tuple(FieldInfo(name=n, native_type=t) for n, t in fields),
                upstreams=upstreams,
            )

        orders = ds("orders", ("order_id", "VARCHAR"), ("updated_at", "TIMESTAMP"))
        catalog = InMemoryCatalog(
            [
                orders,
                ds("invoices", ("id", "VARCHAR"), ("issued_at", "TIMESTAMP"),
                   upstreams=(orders.urn,)),
                ds("events", ("a_at", "TIMESTAMP"), ("b_at", "TIMESTAMP")),
                ds("codes", ("code", "VARCHAR")),
            ]
        )  # fmt: skip
        return catalog, SimilarityQuery(
            pattern=STALE_DATA, control=self.control(), source_urn=orders.urn
        )


def _urn(name: str) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)"


def test_a_candidate_is_judged_by_its_own_timestamp_field_or_excluded_saying_why() -> None:
    catalog, query = TestFreshnessControl().estate()
    resolution = resolve_similar_assets(query, catalog)
    [invoices] = [c for c in resolution.candidates if c.urn == _urn("invoices")]
    assert invoices.field_mapping == {"updated_at": "issued_at"}
    assert "role match for updated_at" in invoices.explanation
    reasons = {e.urn: e.reason for e in resolution.excluded}
    assert "several date or timestamp fields (a_at, b_at)" in reasons[_urn("events")]
    assert "no date or timestamp fields" in reasons[_urn("codes")]


def test_age_is_judged_as_of_the_given_time_with_zones_read_right(tmp_path: Path) -> None:
    control = parse_control_spec({"type": "freshness", "max_age": "90m", "timestamp_field": "ts"})
    texts = write_snapshot(
        tmp_path / "zoned.csv", [{"ts": "2026-03-01T10:00:00+02:00"}, {"ts": "2026-03-01 07:30"}]
    )
    # the zoned value is 08:00 UTC, the plain one 07:30 UTC: the newest is 08:00 UTC
    at_nine = run_control(control, texts, as_of_ms=parse_instant("2026-03-01T09:00Z"))
    assert at_nine.passed and at_nine.measures is not None
    assert (at_nine.measures["newest"], at_nine.measures["age_seconds"]) == (
        "2026-03-01T08:00:00Z",
        3600.0,
    )
    late = run_control(control, texts, as_of_ms=parse_instant("2026-03-01T10:00:01Z"))
    assert (late.passed, late.violation_count, late.sample[0]["age"]) == (False, 1, "2h")
    with pytest.raises(ControlSpecError, match="judged as of a time"):
        run_control(control, texts)


def test_an_empty_table_or_a_column_of_no_times_is_stale_and_a_number_is_refused(
    tmp_path: Path,
) -> None:
    control = parse_control_spec({"type": "freshness", "max_age": "1d", "timestamp_field": "ts"})
    at = parse_instant("2026-03-01")
    garbage = write_snapshot(tmp_path / "garbage.csv", [{"ts": "soon"}, {"ts": ""}])
    result = run_control(control, garbage, as_of_ms=at)
    assert (result.passed, result.sample[0]["newest"], result.sample[0]["age_seconds"]) == (
        False,
        None,
        None,
    )
    numbers = write_snapshot(tmp_path / "epoch.parquet", [{"ts": 1789000000}])
    with pytest.raises(SnapshotError, match="'ts' is BIGINT, not a date or a timestamp"):
        run_control(control, numbers, as_of_ms=at)


def test_without_a_field_it_is_judged_on_the_recorded_last_update_only(tmp_path: Path) -> None:
    control = parse_control_spec({"type": "freshness", "max_age": "2d"})
    at = parse_instant("2026-03-05T00:00Z")
    fresh = run_control_on_recorded(
        control, RecordedFacts(last_updated_ms=parse_instant("2026-03-04")), "op", as_of_ms=at
    )
    stale = run_control_on_recorded(
        control, RecordedFacts(last_updated_ms=parse_instant("2026-03-01")), "op", as_of_ms=at
    )
    assert (fresh.passed, stale.passed, stale.measures["age"]) == (True, False, "4d")  # type: ignore[index]
    with pytest.raises(SnapshotError, match="records no update"):
        run_control_on_recorded(control, RecordedFacts(), "op", as_of_ms=at)
    snapshot = write_snapshot(tmp_path / "s.parquet", [{"a": 1}])
    with pytest.raises(ControlSpecError, match="judged on what DataHub records"):
        run_control(control, snapshot, as_of_ms=at)


def test_open_end_dates_are_ignored_and_counted_the_newest_real_time_judged(
    tmp_path: Path,
) -> None:
    control = parse_control_spec({"type": "freshness", "max_age": "1d", "timestamp_field": "d"})
    rows = [{"d": date(2026, 3, 1)}, {"d": date(2026, 2, 27)}] + [{"d": date(9999, 12, 31)}] * 2
    snapshot = write_snapshot(tmp_path / "history.parquet", rows)
    fresh = run_control(control, snapshot, as_of_ms=parse_instant("2026-03-01T12:00Z"))
    assert fresh.passed and fresh.measures is not None
    assert (fresh.measures["newest"], fresh.measures["age"]) == ("2026-03-01T00:00:00Z", "12h")
    assert fresh.measures["future_values_ignored"] == 2
    stale = run_control(control, snapshot, as_of_ms=parse_instant("2026-03-03T00:00Z"))
    assert (stale.passed, stale.sample[0]["age"], stale.sample[0]["future_values_ignored"]) == (
        False,
        "2d",
        2,
    )
    only_future = write_snapshot(tmp_path / "open.parquet", [{"d": date(9999, 12, 31)}] * 3)
    nothing = run_control(control, only_future, as_of_ms=parse_instant("2026-03-01T12:00Z"))
    assert (nothing.passed, nothing.violation_count) == (False, 1)
    assert (nothing.sample[0]["newest"], nothing.sample[0]["future_values_ignored"]) == (None, 3)


def test_a_time_ahead_within_future_tolerance_counts_beyond_it_does_not(tmp_path: Path) -> None:
    at = parse_instant("2026-03-01T12:00Z")
    rows = [{"ts": datetime(2026, 3, 1, 12, 30)}, {"ts": datetime(2026, 2, 20)}]
    snapshot = write_snapshot(tmp_path / "s.parquet", rows)
    default = parse_control_spec({"type": "freshness", "max_age": "2h", "timestamp_field": "ts"})
    ahead = run_control(default, snapshot, as_of_ms=at)
    assert ahead.passed and ahead.measures is not None
    assert (ahead.measures["age"], ahead.measures["future_values_ignored"]) == ("-30m", 0)
    strict = parse_control_spec({**default.model_dump(), "future_tolerance": "10M"})
    assert dump_control_line(strict).endswith("future_tolerance: 10m}")
    assert "future_tolerance" not in dump_control_line(default)  # the default is not written
    beyond = run_control(strict, snapshot, as_of_ms=at)
    assert (beyond.passed, beyond.sample[0]["newest"]) == (False, "2026-02-20T00:00:00Z")
    assert beyond.sample[0]["future_values_ignored"] == 1


def test_a_recorded_last_update_ahead_beyond_the_tolerance_is_not_fresh() -> None:
    control = parse_control_spec({"type": "freshness", "max_age": "2d"})
    at = parse_instant("2026-03-05T00:00Z")
    tomorrow = RecordedFacts(last_updated_ms=parse_instant("2026-03-06T00:00Z"))
    ahead = run_control_on_recorded(control, tomorrow, "op", as_of_ms=at)
    assert (ahead.passed, ahead.violation_count) == (False, 1)
    assert (ahead.sample[0]["newest"], ahead.sample[0]["future_values_ignored"]) == (None, 1)
    soon = RecordedFacts(last_updated_ms=parse_instant("2026-03-05T00:30Z"))
    within = run_control_on_recorded(control, soon, "op", as_of_ms=at)
    assert within.passed and within.measures is not None
    assert within.measures["future_values_ignored"] == 0


def _daily_history(folder: Path, last_load_day: int, days: int = 12) -> Path:
    """Daily snapshots 2026-09-01.. of a table loaded each morning until ``last_load_day``."""
    for day in range(1, days + 1):
        loaded = min(day, last_load_day)
        rows = [{"id": i, "updated_at": datetime(2026, 9, loaded, 6 + i)} for i in range(3)]
        write_snapshot(folder / f"2026-09-{day:02d}.parquet", rows)
    return folder


def test_a_backtest_judges_each_snapshot_as_of_its_own_time(tmp_path: Path) -> None:
    folder = _daily_history(tmp_path / "orders", last_load_day=9)
    (folder / "labels.yaml").write_text(
        yaml.safe_dump({"failures": ["2026-09-10", "2026-09-11", "2026-09-12"]})
    )
    control = parse_control_spec(
        {"type": "freshness", "max_age": "26h", "timestamp_field": "updated_at"}
    )
    report = backtest(control, [load_history(folder)])
    assert (report.true_positives, report.false_positives, report.false_negatives) == (3, 0, 0)
    first = report.per_snapshot[0]
    # a date id is the end of its day: loaded 06:00-08:00, judged at midnight after
    assert first.measures is not None and first.measures["age_seconds"] == 16 * 3600


def test_snapshot_times_give_ids_that_are_not_times_their_time(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    for run, day in (("run-1", 1), ("run-2", 2), ("run-3", 2)):
        write_snapshot(folder / f"{run}.parquet", [{"updated_at": datetime(2026, 9, day, 6)}])
    (folder / "labels.yaml").write_text(
        "snapshot_times:\n  run-1: 2026-09-01T07:00:00Z\n  run-2: 2026-09-02T07:00\n"
    )
    control = parse_control_spec(
        {"type": "freshness", "max_age": "2h", "timestamp_field": "updated_at"}
    )
    report = backtest(control, [load_history(folder)])
    verdicts = {o.snapshot_id: (o.evaluable, o.flagged) for o in report.per_snapshot}
    assert verdicts["run-1"] == verdicts["run-2"] == (True, False)
    assert verdicts["run-3"] == (False, None)
    [unjudged] = [o for o in report.per_snapshot if o.snapshot_id == "run-3"]
    assert "'run-3' is not a time" in (unjudged.reason or "")
    (folder / "labels.yaml").write_text("snapshot_times:\n  run-1: next tuesday\n")
    with pytest.raises(HistoryError, match=r"snapshot_times.'run-1'.*not an ISO 8601 time"):
        load_history(folder)


def test_a_backtest_without_a_field_replays_the_last_update_from_the_history(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "table"
    for day, content in ((1, 1), (2, 2), (3, 2), (4, 2), (5, 3)):  # unchanged on 3 and 4
        write_snapshot(folder / f"2026-09-0{day}.parquet", [{"v": content}])
    control = parse_control_spec({"type": "freshness", "max_age": "30h"})
    report = backtest(control, [load_history(folder)])
    flagged = [o.snapshot_id for o in report.per_snapshot if o.flagged]
    assert flagged == ["2026-09-04"]  # last changed on 09-02: 2 days old at the end of 09-04


def test_max_age_is_learned_from_the_earlier_normal_lags_only(tmp_path: Path) -> None:
    folder = tmp_path / "orders"
    for day in range(1, 13):
        # normal loads lag 17h at the snapshot's end of day; the held-out last normal one 23h
        hour = 1 if day == 12 else 7
        loaded = 9 if day in (10, 11) else day
        write_snapshot(
            folder / f"2026-09-{day:02d}.parquet",
            [{"id": 1, "note": "x", "updated_at": datetime(2026, 9, loaded, hour)}],
        )
    (folder / "labels.yaml").write_text(
        yaml.safe_dump({"failures": [{"snapshot": "2026-09-10", "incident": "urn:li:incident:s"}]})
    )
    finding = discover_freshness(load_history(folder), "urn:li:incident:s")
    assert finding is not None
    # a day between snapshots (above the 17h lag) with 25% headroom; the held-out lag is
    # not seen
    assert finding.control == {
        "type": "freshness",
        "max_age": "30h",
        "timestamp_field": "updated_at",
    }
    assert "2026-09-12" in finding.learned_from.held_out
    assert "2026-09-10 lags 1d17h" in finding.fact
    assert "at most 17h" in finding.fact


def test_lags_are_drafted_from_the_newest_time_not_ahead_never_negative(tmp_path: Path) -> None:
    """A history table's open-end rows in every snapshot: the lags are those of its real
    times (so max_age is learned as without them); a time ahead within the tolerance is no
    lag, a snapshot of open ends only has no time."""
    folder = tmp_path / "orders"
    for day in range(1, 13):
        loaded = 9 if day in (10, 11) else day
        write_snapshot(
            folder / f"2026-09-{day:02d}.parquet",
            [
                {"id": 1, "updated_at": datetime(2026, 9, loaded, 7)},
                {"id": 2, "updated_at": OPEN_END},
            ],
        )
    (folder / "labels.yaml").write_text(
        yaml.safe_dump({"failures": [{"snapshot": "2026-09-10", "incident": "urn:li:incident:s"}]})
    )
    history = load_history(folder)
    finding = discover_freshness(history, "urn:li:incident:s")
    assert finding is not None
    assert finding.control == {
        "type": "freshness",
        "max_age": "30h",
        "timestamp_field": "updated_at",
    }
    assert "at most 17h" in finding.fact and "2026-09-10 lags 1d17h" in finding.fact
    write_snapshot(folder / "2026-09-13.parquet", [{"id": 1, "updated_at": OPEN_END}])
    write_snapshot(
        folder / "2026-09-14.parquet", [{"id": 1, "updated_at": datetime(2026, 9, 15, 0, 30)}]
    )
    lags = snapshot_lags(
        load_history(folder), "updated_at", ["2026-09-01", "2026-09-13", "2026-09-14"]
    )
    assert lags == {"2026-09-01": 17 * 3600, "2026-09-13": None, "2026-09-14": 0.0}


def test_the_cli_judges_as_of_a_time_and_refuses_a_bad_one(tmp_path: Path) -> None:
    spec = tmp_path / "fresh.yaml"
    spec.write_text("type: freshness\nmax_age: 26h\ntimestamp_field: updated_at\n")
    snapshot = write_snapshot(tmp_path / "s.parquet", [{"updated_at": datetime(2026, 9, 14, 6, 0)}])
    runner = CliRunner()
    args = ["control", "run", str(spec), "--snapshot", str(snapshot), "--json"]
    fresh = runner.invoke(cli, [*args, "--as-of", "2026-09-15T06:00"])
    assert fresh.exit_code == 0, fresh.output
    assert json.loads(fresh.output)["measures"]["age_seconds"] == 86400
    stale = runner.invoke(cli, [*args, "--as-of", "2026-09-15T08:00:01+00:00"])
    assert stale.exit_code == 1
    assert json.loads(stale.output)["violation_count"] == 1
    now = runner.invoke(cli, args)  # default: now, long after 2026-09-14
    assert now.exit_code == 1
    bad = runner.invoke(cli, [*args, "--as-of", "yesterday"])
    assert bad.exit_code == 2 and "not an ISO 8601 time" in bad.output
