"""The missing-rows kind: ``volume`` passes the kind conformance suite, judges a count against
absolute bounds and against the median of earlier counts (saying which), is backtested in time
order, is drafted from the history without peeking, and carries its counts from run to run on
landing until a partial load raises incident B on another dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner
from datahub.metadata.schema_classes import AssertionRunEventClass, DatasetProfileClass

from reflex_actions.backtest import backtest, load_history
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.catalog.steward import acting_as
from reflex_actions.cli.main import cli
from reflex_actions.config import ReflexConfig
from reflex_actions.controls import parse_control_spec
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.executor import run_control
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.scheduled import on_schedule
from reflex_actions.kinds.missing_rows import MISSING_ROWS, discover_volume
from reflex_actions.lessons.model import IncidentText, LessonState
from reflex_actions.similarity import SimilarityQuery
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.conformance.control_cases import ControlCase
from tests.conftest import write_snapshot
from tests.loop.store import (
    active_incident,
    demo_with_resolved,
    history,
    incidents_b,
    land,
    store_of,
    write_estate_snapshot,
)

VOLUME = ControlCase(
    type_name="volume",
    columns={"id": "order_id", "amount": "amount"},
    make_spec=lambda c: {"type": "volume", "min_rows": 5, "max_rows": 8},
    passing_rows=[{"id": i, "amount": i} for i in range(6)],
    failing_rows=[{"id": i, "amount": i} for i in range(3)],
    expected_violations=2,
    expected_first_sample={"row_count": 3, "lower_bound": 5, "upper_bound": 8},
    invalid_specs=[
        ({"type": "volume"}, "give 'min_rows', 'max_rows' or 'max_drop'"),
        ({"type": "volume", "min_rows": 9, "max_rows": 8}, "greater than max_rows"),
        ({"type": "volume", "max_drop": 1.0}, "max_drop"),
        ({"type": "volume", "max_drop": 0}, "max_drop"),
        ({"type": "volume", "min_rows": -1}, "min_rows"),
        ({"type": "volume", "min_rows": True}, "min_rows"),
        ({"type": "volume", "max_drop": 0.5, "window": 0}, "window"),
        ({"type": "volume", "max_drop": 0.5, "window": 366}, "window"),
        ({"type": "volume", "min_rows": 10**13}, "min_rows"),
    ],
)


class TestVolumeControl(BaseLessonKindConformance):
    kind_pattern = MISSING_ROWS
    incident = IncidentText(
        urn="urn:li:incident:partial",
        title="A partial load of sales.orders",
        description="The loader timed out mid-way and half the rows never arrived.",
    )
    control_case = VOLUME
    renaming: ClassVar[dict[str, str] | None] = None

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        def ds(name: str, domain: str, upstreams: tuple[str, ...] = ()) -> DatasetContext:
            return DatasetContext(
                urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
                name=name,
                platform="snowflake",
                domain=domain,
                upstreams=upstreams,
            )

        source = ds("sales.orders", "urn:li:domain:sales")
        catalog = InMemoryCatalog(
            [
                source,
                ds("sales.order_lines", "urn:li:domain:sales", (source.urn,)),
                ds("web.clicks", "urn:li:domain:web"),
            ]
        )
        query = SimilarityQuery(pattern=MISSING_ROWS, control=self.control(), source_urn=source.urn)
        return catalog, query


# --- the count against its bounds ---------------------------------------------------------------
def rows(count: int) -> list[dict[str, int]]:
    return [{"id": i} for i in range(count)]


@pytest.mark.parametrize(
    ("spec", "earlier", "violations", "lower", "rule"),
    [
        ({"min_rows": 50}, (), 10, 50, "absolute bounds"),
        ({"max_rows": 30}, (), 10, None, "absolute bounds"),
        (
            {"max_drop": 0.5, "window": 3},
            (),
            0,
            None,
            "absolute bounds only: no earlier counts to judge the drop against",
        ),
        # the median of the last 3 of 10, 100, 90, 100 is 100: at least 50 rows
        (
            {"max_drop": 0.5, "window": 3},
            (10, 100, 90, 100),
            10,
            50,
            "at most 50% below the median of the 3 earlier counts",
        ),
        (
            {"max_drop": 0.5, "window": 3, "min_rows": 45},
            (60, 60, 60),
            5,
            45,
            "at most 50% below the median of the 3 earlier counts and the absolute bounds",
        ),
    ],
)
def test_a_count_is_judged_against_its_bounds_and_says_by_which_rule(
    tmp_path: Path,
    spec: dict[str, Any],
    earlier: tuple[int, ...],
    violations: int,
    lower: int | None,
    rule: str,
) -> None:
    path = write_snapshot(tmp_path / "s.parquet", rows(40))
    control = parse_control_spec({"type": "volume", **spec})
    result = run_control(control, path, earlier_counts=earlier)
    assert (result.violation_count, result.rows_scanned) == (violations, 40)
    expected = list(earlier[-control.window :]) if control.max_drop else None
    assert result.earlier_counts == expected
    assert result.passed is (violations == 0)
    if violations:  # the sample of a failure is the judgement
        [sample] = result.sample
        assert (sample["row_count"], sample["lower_bound"], sample["rule"]) == (40, lower, rule)
    else:
        assert result.sample == []
    assert rule  # (the rule of a passing run is what its earlier_counts show)


def write_counts(folder: Path, counts: dict[str, int], failures: list[str]) -> Path:
    folder.mkdir(parents=True)
    for snapshot_id, count in counts.items():
        write_snapshot(folder / f"{snapshot_id}.parquet", rows(count), columns=["id"])
    (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": failures}))
    return folder


def test_a_backtest_judges_each_snapshot_against_the_ones_before_it(tmp_path: Path) -> None:
    counts = {"d1": 100, "d2": 110, "d3": 40, "d4": 105, "d5": 30, "d6": 0}
    folder = write_counts(tmp_path / "orders", counts, ["d3", "d6"])
    control = parse_control_spec({"type": "volume", "max_drop": 0.5, "window": 3})
    report = backtest(control, [load_history(folder)])
    outcomes = {o.snapshot_id: o for o in report.per_snapshot}
    # d5 (30) lies far below the median of d2, d3, d4 (105): a false alarm; d6 is empty and
    # judged against d3, d4, d5 (median 40: at least 20 rows)
    assert [outcomes[s].violation_count for s in counts] == [0, 0, 13, 0, 23, 20]
    assert outcomes["d3"].sample[0]["rule"] == (
        "at most 50% below the median of the 2 earlier counts"
    )
    assert (report.true_positives, report.false_positives, report.true_negatives) == (2, 1, 3)


# --- evidence -------------------------------------------------------------------------------------
def test_max_drop_is_learned_from_the_earlier_snapshots_and_catches_the_incident(
    tmp_path: Path,
) -> None:
    counts = {f"2026-09-{d:02d}": n for d, n in enumerate([100, 96, 104, 92, 100, 45, 99, 60], 1)}
    folder = write_counts(
        tmp_path / "orders", counts, [{"snapshot": "2026-09-06", "incident": "urn:li:incident:p"}]
    )
    finding = discover_volume(load_history(folder), "urn:li:incident:p")
    assert finding is not None
    # the normal drops learned from reach 8% (92 against 100): 0.2 leaves headroom, 45 breaks it
    assert finding.control == {"type": "volume", "max_drop": 0.2, "window": 7}
    # the late 60 is held out: learning from it would have widened the rule
    assert finding.learned_from.held_out == ["2026-09-07", "2026-09-08"]
    assert "2026-09-06 lies 55% below" in finding.fact


def test_the_cli_takes_earlier_counts_or_judges_on_the_absolute_bounds(tmp_path: Path) -> None:
    spec = tmp_path / "volume.yaml"
    spec.write_text("{type: volume, max_drop: 0.5, window: 2}\n")
    snapshot = write_snapshot(tmp_path / "s.parquet", rows(40))
    runner = CliRunner()
    args = ["control", "run", str(spec), "--snapshot", str(snapshot), "--json"]
    judged = runner.invoke(cli, [*args, "--baseline-counts", "10, 100,100"])
    assert judged.exit_code == 1, judged.output
    assert json.loads(judged.output)["earlier_counts"] == [100, 100]
    alone = runner.invoke(cli, args)
    assert alone.exit_code == 0  # judged on the absolute bounds alone (none): it says so
    assert json.loads(alone.output)["earlier_counts"] == []
    bad = runner.invoke(cli, [*args, "--baseline-counts", "10,-3"])
    assert bad.exit_code == 2 and "--baseline-counts" in bad.output


# --- the whole loop on the embedded store --------------------------------------------------------
PARTIAL = "urn:li:incident:orders-partial-load"
ORDERS, INVOICES = dataset_urn("sales.orders"), dataset_urn("sales.invoices")


def order_ids(count: int) -> dict[str, list[Any]]:
    return {"order_id": [f"o{i}" for i in range(count)]}


def test_a_partial_load_closes_the_loop_on_another_dataset(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    snapshots = workdir / "snapshots"
    days = {"2026-09-10": 100, "2026-09-11": 104, "2026-09-12": 98, "2026-09-13": 101}
    for name, counts in {
        "sales.orders": {**days, "2026-09-14": 40, "2026-09-15": 99},
        "sales.invoices": days,
    }.items():
        for day, count in counts.items():
            write_estate_snapshot(snapshots / name / f"{day}.parquet", name, order_ids(count))
    (snapshots / "sales.orders" / "labels.yaml").write_text(
        yaml.safe_dump({"failures": [{"snapshot": "2026-09-14", "incident": PARTIAL}]})
    )
    incident = active_incident(
        PARTIAL,
        ORDERS,
        "A partial load of sales.orders",
        "On 2026-09-14 the loader timed out and half the rows never arrived.",
    )
    demo = demo_with_resolved(workdir, incident, "The loader now fails instead of committing.")
    store = store_of(workdir)
    try:
        lesson = demo.lesson(PARTIAL)
        assert (lesson.failure_pattern, lesson.control) == (
            MISSING_ROWS,
            {"type": "volume", "max_drop": 0.2, "window": 7},
        )
        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        lesson = demo.lesson(PARTIAL)
        assert lesson.state is LessonState.PENDING_APPROVAL
        assert "| sales.invoices |" in lesson.report
        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = demo.lesson(PARTIAL)
        assert INVOICES in lesson.published_scope

        landing = snapshots / "landing" / "sales.invoices"
        # a full load is judged against the history's counts, and carries its count forward
        full = write_estate_snapshot(
            landing / "2026-10-01.parquet", "sales.invoices", order_ids(97)
        )
        land(demo, INVOICES, full, "2026-10-01")
        demo.react()
        assert incidents_b(store, INVOICES) == {}
        assertion = assertion_urn(lesson.urn, INVOICES)
        [(_, first)] = history(store, assertion, AssertionRunEventClass)
        assert first.result is not None and first.result.nativeResults is not None
        assert json.loads(first.result.nativeResults["row_counts"]) == [100, 104, 98, 101, 97]
        # a partial one is judged against those: at most 20% below their median (100)
        part = write_estate_snapshot(
            landing / "2026-10-02.parquet", "sales.invoices", order_ids(50)
        )
        land(demo, INVOICES, part, "2026-10-02")
        demo.react()
        [(_, info)] = incidents_b(store, INVOICES).items()
        assert "30 violation(s) in 50 row(s)" in (info.description or "")

        # DataHub profiles the invoices: the count is judged with no data read, against the
        # counts the landings carried (median of [100, 104, 98, 101, 97, 50] is 99.5: >= 80)
        config = ReflexConfig.model_validate(demo.config["action"]["config"])
        for count in (-1, 10**15):  # no table holds these: malformed, judged nowhere
            bad = DatasetProfileClass(timestampMillis=demo.tick(), rowCount=count)
            demo.catalog.emit([acting_as(DEFAULT_ACTOR, INVOICES, bad)])
        demo.react()
        assert len(history(store, assertion, AssertionRunEventClass)) == 2
        profiled_at = demo.tick()
        profile = DatasetProfileClass(timestampMillis=profiled_at, rowCount=60)
        demo.catalog.emit([acting_as(DEFAULT_ACTOR, INVOICES, profile)])
        # a sweep catches the profile up before its event is read; the event then finds it done
        sweep = on_schedule(HandlerContext(catalog=demo.catalog, config=config), demo.tick(), 3600)
        assert (sweep.judged, sweep.failed) == (1, 1)
        demo.react()
        runs = history(store, assertion, AssertionRunEventClass)
        assert len(runs) == 3
        profiled = runs[-1][1]
        assert profiled.timestampMillis == profiled_at and profiled.runId.startswith("profile-")
        assert profiled.result is not None and profiled.result.unexpectedCount == 20
        assert json.loads(profiled.result.nativeResults["row_counts"])[-2:] == [50, 60]  # type: ignore[index]
        assert len(incidents_b(store, INVOICES)) == 2
    finally:
        demo.catalog.close()
