"""The demo's scenarios one at a time (``datahub-reflex demo --scenario NAME``): each new kind's
scenario closes its loop with incident B on another dataset, and runs nothing else.

Each scenario runs once per module through the CLI; the tests then read the store directly.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    IncidentInfoClass,
    IncidentStateClass,
    SchemaMetadataClass,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.cli.main import cli
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import (
    INVOICES_INCIDENT,
    LANDING_DAY,
    ORDER_LINES_INCIDENT,
    ORDERS_INCIDENT,
    PARTIAL_LOAD_INCIDENT,
    RENAMED_COLUMN_INCIDENT,
    STALE_INCIDENT,
    landing_snapshot,
)
from reflex_actions.demo.metadata import incidents
from reflex_actions.demo.run import SCENARIOS, Demo
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.lessons.model import LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from tests.loop.store import incidents_b, latest, store_of, stored_lesson, urns_with
from tests.stages import FullLoop

#: incident A of each scenario
INCIDENTS = tuple(str(mcp.entityUrn) for mcp in incidents())
ORDERS, INVOICES = dataset_urn("sales.orders"), dataset_urn("sales.invoices")
ORDER_LINES, RETURNS = dataset_urn("sales.order_lines"), dataset_urn("sales.returns")
PAYMENTS, REFUNDS = dataset_urn("finance.payments"), dataset_urn("finance.refunds")
PAYOUTS = dataset_urn("finance.payouts")
PAYMENTS_CHILDREN = {
    dataset_urn(name)
    for name in ("finance.ledger_entries", "finance.card_settlements", "finance.payouts")
}


@dataclass(frozen=True)
class ScenarioRun:
    workdir: Path
    exit_code: int
    output: str

    @property
    def store(self) -> Path:
        return store_of(self.workdir)


def run_scenario(workdir: Path, name: str) -> ScenarioRun:
    """``datahub-reflex demo --dir WORKDIR --scenario NAME``, in this process."""
    loggers = [logging.getLogger(name) for name in ("datahub_actions", "reflex_actions")]
    levels = [logger.level for logger in loggers]
    try:
        result = CliRunner().invoke(cli, ["demo", "--dir", str(workdir), "--scenario", name])
    finally:  # the demo quiets these loggers for its own output; give other tests them back
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return ScenarioRun(workdir, result.exit_code, result.output)


@pytest.fixture(scope="module")
def missing_values(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    yield run_scenario(tmp_path_factory.mktemp("missing-values") / "demo", "missing-values")


@pytest.fixture(scope="module")
def invalid_values(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    yield run_scenario(tmp_path_factory.mktemp("invalid-values") / "demo", "invalid-values")


@pytest.fixture(scope="module")
def orphaned_references(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    workdir = tmp_path_factory.mktemp("orphaned-references") / "demo"
    yield run_scenario(workdir, "orphaned-references")


@pytest.fixture(scope="module")
def missing_rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    yield run_scenario(tmp_path_factory.mktemp("missing-rows") / "demo", "missing-rows")


@pytest.fixture(scope="module")
def stale_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    yield run_scenario(tmp_path_factory.mktemp("stale-data") / "demo", "stale-data")


@pytest.fixture(scope="module")
def schema_change(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioRun]:
    yield run_scenario(tmp_path_factory.mktemp("schema-change") / "demo", "schema-change")


def count(sql: str, path: Path) -> int:
    """A count over one snapshot file, computed by DuckDB without Reflex's code."""
    ((value,),) = duckdb.execute(sql.format(snapshot="read_parquet(?)"), [str(path)]).fetchall()
    return int(value)


def assert_incident_b(run: ScenarioRun, incident_a: str, lands_on: str, violations: int) -> None:
    """Incident B on ``lands_on`` (not incident A's dataset), raised by the lesson's assertion
    there for the landed snapshot, whose run event counts ``violations``."""
    lesson_urn = lesson_urn_for(incident_a)
    assertion = assertion_urn(lesson_urn, lands_on)
    raised = incidents_b(run.store)
    assert list(raised) == [recurrence_incident_urn(assertion, LANDING_DAY.isoformat())]
    (info,) = raised.values()
    assert info.entities == [lands_on]
    assert info.source is not None and info.source.sourceUrn == assertion
    assert incident_a in (info.description or "")
    [recurrence] = stored_lesson(run.store, lesson_urn).recurrences
    assert recurrence.dataset == lands_on
    event = latest(run.store, assertion, AssertionRunEventClass)
    assert event is not None and event.result is not None
    assert event.result.unexpectedCount == violations


def test_missing_values_closes_its_loop_on_the_invoices(missing_values: ScenarioRun) -> None:
    assert missing_values.exit_code == 0, missing_values.output
    lesson = stored_lesson(missing_values.store, lesson_urn_for(ORDERS_INCIDENT))
    assert (lesson.failure_pattern, lesson.proposer.name) == ("missing_values", "deterministic")
    assert lesson.control == {"type": "not_null", "field": "customer_id", "key": ["order_id"]}
    assert lesson.state is LessonState.PUBLISHED
    assert set(lesson.published_scope) == {ORDERS, INVOICES}
    landed = landing_snapshot(missing_values.workdir / "snapshots", "sales.invoices")
    nulls = count("SELECT count(*) FROM {snapshot} WHERE customer_id IS NULL", landed)
    assert nulls > 0
    assert_incident_b(missing_values, ORDERS_INCIDENT, INVOICES, nulls)


def test_invalid_values_closes_its_loop_on_the_returns(invalid_values: ScenarioRun) -> None:
    assert invalid_values.exit_code == 0, invalid_values.output
    lesson = stored_lesson(invalid_values.store, lesson_urn_for(ORDER_LINES_INCIDENT))
    assert (lesson.failure_pattern, lesson.proposer.name) == ("invalid_values", "deterministic")
    # every normal line orders 1 to 10 units: the readable range is 0 to 10
    assert lesson.control == {"type": "value_range", "field": "quantity", "min": 0, "max": 10}
    # the bounds were learned from the earlier 20 normal days: the page scores them apart
    assert "| in-sample (learned from) | 21 | 1 | 0 | 20 | 0 | 0 | 100% | 100% |" in lesson.report
    assert (
        "- learned from: sales.order_lines 20 snapshots 2026-09-01 … 2026-09-20 and the "
        "incident's 2026-09-24" in lesson.report
    )
    assert lesson.state is LessonState.PUBLISHED
    assert set(lesson.published_scope) == {ORDER_LINES, RETURNS}
    landed = landing_snapshot(invalid_values.workdir / "snapshots", "sales.returns")
    negative = count("SELECT count(*) FROM {snapshot} WHERE quantity < 0", landed)
    assert negative > 0
    assert_incident_b(invalid_values, ORDER_LINES_INCIDENT, RETURNS, negative)


def test_orphaned_references_close_their_loop_on_the_order_lines(
    orphaned_references: ScenarioRun,
) -> None:
    run = orphaned_references
    assert run.exit_code == 0, run.output
    lesson = stored_lesson(run.store, lesson_urn_for(INVOICES_INCIDENT))
    assert (lesson.failure_pattern, lesson.proposer.name) == (
        "orphaned_references",
        "deterministic",
    )
    assert lesson.control == {
        "type": "referential_integrity",
        "field": "order_id",
        "references": {"dataset": ORDERS, "field": "order_id"},
    }
    assert lesson.state is LessonState.PUBLISHED
    assert set(lesson.published_scope) == {INVOICES, ORDER_LINES, RETURNS}
    snapshots = run.workdir / "snapshots"
    landed = landing_snapshot(snapshots, "sales.order_lines")
    parent = landing_snapshot(snapshots, "sales.orders")
    ((orphans,),) = duckdb.execute(
        "SELECT count(*) FROM read_parquet(?) WHERE order_id NOT IN "
        "(SELECT order_id FROM read_parquet(?))",
        [str(landed), str(parent)],
    ).fetchall()
    assert orphans > 0
    assert_incident_b(run, INVOICES_INCIDENT, ORDER_LINES, orphans)


def test_missing_rows_close_their_loop_on_the_refunds(missing_rows: ScenarioRun) -> None:
    run = missing_rows
    assert run.exit_code == 0, run.output
    lesson = stored_lesson(run.store, lesson_urn_for(PARTIAL_LOAD_INCIDENT))
    assert (lesson.failure_pattern, lesson.proposer.name) == ("missing_rows", "deterministic")
    # learned with headroom from the normal loads (none far below its trailing median); the
    # partial load lies far below it (the default window of 7 is not stored)
    assert lesson.control == {"type": "volume", "max_drop": 0.4}
    assert any("2026-09-14 lies 57% below" in e.quote for e in lesson.evidence)
    # the labelled partial load is the one payments snapshot the volume rule flags
    assert "| finance.payments | 30 | 1 | 0 | 29 | 0 | 0 | 100% | 100% |" in lesson.report
    assert lesson.state is LessonState.PUBLISHED
    assert set(lesson.published_scope) == {PAYMENTS, REFUNDS, *PAYMENTS_CHILDREN}
    # on its first run the landed refunds are judged against the refunds history's last loads
    snapshots = run.workdir / "snapshots"
    ((landed,),) = duckdb.execute(
        "SELECT count(*) FROM read_parquet(?)",
        [str(landing_snapshot(snapshots, "finance.refunds"))],
    ).fetchall()
    history = duckdb.execute(
        "SELECT count(*) FROM read_parquet(?, filename = true) GROUP BY filename ORDER BY filename",
        [str(snapshots / "finance.refunds" / "*.parquet")],
    ).fetchall()
    lower_bound = math.ceil(statistics.median(n for (n,) in history[-7:]) * (1 - 0.4))
    assert lower_bound - landed > 0
    assert_incident_b(run, PARTIAL_LOAD_INCIDENT, REFUNDS, lower_bound - landed)


def test_a_schema_change_closes_its_loop_on_the_invoices(schema_change: ScenarioRun) -> None:
    run = schema_change
    assert run.exit_code == 0, run.output
    lesson = stored_lesson(run.store, lesson_urn_for(RENAMED_COLUMN_INCIDENT))
    assert (lesson.failure_pattern, lesson.proposer.name) == ("schema_change", "deterministic")
    assert lesson.control == {"type": "schema_contract", "columns": {"amount_minor": "BIGINT"}}
    assert "| sales.orders | 30 | 1 | 0 | 29 | 0 | 0 | 100% | 100% |" in lesson.report
    assert "reads sales.orders (sales.orders -\\> sales.invoices)" in lesson.report
    assert lesson.state is LessonState.PUBLISHED
    assert set(lesson.published_scope) == {ORDERS, INVOICES}
    landed = landing_snapshot(run.workdir / "snapshots", "sales.invoices")
    missing = count(
        "SELECT count(*) FROM (SELECT unnest(['amount_minor']) AS name) WHERE name NOT IN "
        "(SELECT column_name FROM (DESCRIBE SELECT * FROM {snapshot}))",
        landed,
    )
    assert missing == 1
    assert_incident_b(run, RENAMED_COLUMN_INCIDENT, INVOICES, missing)


def test_stale_data_closes_its_loop_on_the_payouts_by_the_schedule(stale_data: ScenarioRun) -> None:
    run = stale_data
    assert run.exit_code == 0, run.output
    lesson = stored_lesson(run.store, lesson_urn_for(STALE_INCIDENT))
    assert (lesson.failure_pattern, lesson.proposer.name) == ("stale_data", "deterministic")
    # a day between snapshots (above every normal lag), plus 25%
    assert lesson.control == {"type": "freshness", "max_age": "30h", "timestamp_field": "posted_at"}
    assert "| finance.ledger_entries | 30 | 2 | 0 | 28 | 0 | 0 | 100% | 100% |" in lesson.report
    assert lesson.state is LessonState.PUBLISHED
    assert PAYOUTS in lesson.published_scope
    assertion = assertion_urn(lesson.urn, PAYOUTS)
    [(urn, info)] = incidents_b(run.store).items()
    assert info.entities == [PAYOUTS] and info.source is not None
    assert info.source.sourceUrn == assertion
    assert STALE_INCIDENT in (info.description or "")
    # judged by the schedule, on today's payouts, whose newest row is days old
    today = landing_snapshot(run.workdir / "snapshots", "finance.payouts").with_name(
        "today.parquet"
    )
    newest = count("SELECT epoch_ms(max(paid_at)) FROM {snapshot}", today)
    event = latest(run.store, assertion, AssertionRunEventClass)
    assert event is not None and event.result is not None and event.result.nativeResults
    assert event.runId.startswith("scheduled-")
    assert event.timestampMillis - newest > 30 * 3600 * 1000
    assert urn == recurrence_incident_urn(
        assertion, f"stale-since-{event.result.nativeResults['measured_newest']}"
    )
    # the datasets whose loads landed today are fresh
    for name in ("finance.payments", "finance.card_settlements", "finance.refunds"):
        run_event = latest(
            run.store, assertion_urn(lesson.urn, dataset_urn(name)), AssertionRunEventClass
        )
        assert run_event is not None and run_event.result is not None
        assert run_event.result.type == "SUCCESS", name


@pytest.mark.parametrize(
    ("scenario", "incident"),
    [
        ("missing_values", ORDERS_INCIDENT),
        ("invalid_values", ORDER_LINES_INCIDENT),
        ("orphaned_references", INVOICES_INCIDENT),
        ("missing_rows", PARTIAL_LOAD_INCIDENT),
        ("schema_change", RENAMED_COLUMN_INCIDENT),
        ("stale_data", STALE_INCIDENT),
    ],
)
def test_a_named_scenario_runs_only_itself(
    scenario: str, incident: str, request: pytest.FixtureRequest
) -> None:
    run: ScenarioRun = request.getfixturevalue(scenario)
    terms = [u for u in urns_with(run.store, "glossaryTermInfo") if "reflex.lesson." in u]
    assert terms == [lesson_urn_for(incident)]
    for other in set(INCIDENTS) - {incident}:
        info = latest(run.store, other, IncidentInfoClass)
        assert info is not None, other
        assert info.status.state == IncidentStateClass.ACTIVE, other  # never resolved
    results = run.output.split("== Result ==", 1)[1]
    assert results.count("incident A -> lesson -> control -> incident B") == 1


def test_the_demo_s_tables_have_header_rows_and_say_what_their_figures_cover(
    schema_change: ScenarioRun,
) -> None:
    """The headline covers the recommended scope; the table under it every dataset backtested
    (here the same two)."""
    lines = schema_change.output.splitlines()
    candidates = lines.index("    dataset         score  recommended  why")
    assert lines[candidates + 1].startswith("    sales.invoices  0.80   yes          shares domain")
    scope = next(n for n, line in enumerate(lines) if "Recommended scope" in line)
    assert lines[scope] == (
        "    Recommended scope (2 datasets): precision 100%, recall 100%, 1 labelled failure "
        "caught, 0 false alarms, 0 missed, 0 snapshots not evaluable."
    )
    assert lines[scope + 1 : scope + 3] == [
        "    every dataset backtested  value",
        "    precision                 100%",
    ]
    assert lines[scope + 6].startswith(
        "    dataset         snapshots  TP  FP  TN  FN  not evaluable"
    )


def test_the_demo_prints_no_markdown(schema_change: ScenarioRun) -> None:
    output = schema_change.output
    assert "reads sales.orders (sales.orders -> sales.invoices);" in output
    assert "\\" not in output and "**" not in output and "`" not in output
    assert not [line for line in output.splitlines() if line.lstrip().startswith("|")]


def test_an_unknown_scenario_is_bad_input_naming_the_scenarios(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    run = run_scenario(workdir, "duplicate-rows")
    assert run.exit_code == 2
    assert "unknown scenario 'duplicate-rows'" in run.output
    assert ", ".join(SCENARIOS) in run.output
    assert (
        "duplicates, ownership, missing-values, invalid-values, orphaned-references, "
        "missing-rows, schema-change, stale-data" in run.output
    )
    assert not workdir.exists()  # refused before anything was set up
    hostile = run_scenario(workdir, "x" * 10_000)
    assert hostile.exit_code == 2
    assert len(hostile.output) < 1_000  # the name is quoted as an excerpt, never whole


def test_the_default_demo_plays_every_scenario(full_loop: FullLoop) -> None:
    assert full_loop.closed
    results = full_loop.lines[full_loop.lines.index("\n== Result ==") + 1 :]
    closed = [line.split(":")[0].strip() for line in results if "incident B" in line]
    assert closed == [
        "duplicate rows",
        "orphaned ownership",
        "missing values",
        "invalid values",
        "orphaned references",
        "missing rows",
        "schema change",
        "stale data",
    ]
    store = store_of(full_loop.workdir)
    for incident in INCIDENTS:
        assert stored_lesson(store, lesson_urn_for(incident)).state is LessonState.PUBLISHED
    raised_on = {dataset for info in incidents_b(store).values() for dataset in info.entities}
    assert {INVOICES, RETURNS, ORDER_LINES, REFUNDS, PAYOUTS} <= raised_on


def test_a_recorded_schema_change_raises_incident_b_with_no_data_read(tmp_path: Path) -> None:
    """After the schema-change scenario, an upstream release renames the column again and
    DataHub records the new ``schemaMetadata`` of the orders: the MCL alone judges the
    contract there (no snapshot lands), once, however often the event is delivered."""
    run = run_scenario(tmp_path / "demo", "schema-change")
    assert run.exit_code == 0, run.output
    demo = Demo(run.workdir, say=lambda _: None)
    try:
        schema = demo.catalog.get_aspect(ORDERS, SchemaMetadataClass)
        assert schema is not None
        for field in schema.fields:
            if field.fieldPath == "amount_minor":
                field.fieldPath = "total_minor"
        demo.catalog.emit([acting_as(DEFAULT_ACTOR, ORDERS, schema)])
        demo.react()
        lesson = lesson_urn_for(RENAMED_COLUMN_INCIDENT)
        assertion = assertion_urn(lesson, ORDERS)
        raised = incidents_b(run.store, ORDERS)
        [(_, info)] = raised.items()
        assert "1 violation(s) in 0 row(s)" in (info.description or "")
        assert '"column": "amount_minor"' in (info.description or "")
        event = latest(run.store, assertion, AssertionRunEventClass)
        assert event is not None and event.runId.startswith("schema-")
        # delivered again from the start of the log: the same state as once
        store_of(run.workdir).with_name("reflex.db.reflex-offset").unlink()
        demo.react()
        assert incidents_b(run.store, ORDERS) == raised
        assert latest(run.store, assertion, AssertionRunEventClass) == event
    finally:
        demo.catalog.close()


def test_the_demo_prints_where_its_site_was_written(full_loop: FullLoop) -> None:
    index = full_loop.workdir / "site" / "index.html"
    assert f"  open {index} in a browser" in "\n".join(full_loop.lines)
    assert index.is_file()
