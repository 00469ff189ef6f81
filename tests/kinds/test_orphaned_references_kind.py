"""The orphaned-references kind: ``referential_integrity`` passes the kind conformance suite,
counts exactly against a parent snapshot (NULLs, type mismatches, CSV and Parquet), pairs child
and parent snapshots by id, is drafted from lineage and the history, is validated against the
catalog, and finds similar children downstream of the same parent."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner
from datahub.metadata.schema_classes import AssertionRunEventClass

from reflex_actions.backtest import backtest, load_history
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.cli.main import cli
from reflex_actions.controls import parse_control_spec
from reflex_actions.controls.referential_integrity import text_form
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER
from reflex_actions.demo.run import Demo
from reflex_actions.errors import SchemaDriftError, SnapshotNotFoundError
from reflex_actions.executor import ReferenceSnapshot, run_control
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.kinds.orphaned_references import ORPHANED_REFERENCES
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText, LessonDraft, LessonState
from reflex_actions.lessons.validation import check_draft
from reflex_actions.registry import registered_kinds
from reflex_actions.report.backtest import render_markdown
from reflex_actions.similarity import SimilarityQuery, resolve_similar_assets
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.conformance.control_cases import ControlCase
from tests.conformance.dialect_rendering import (
    RENDERED_DIALECTS,
    RecordingEngine,
    check_every_dialect,
    rendered,
    table_relation,
)
from tests.conftest import write_snapshot
from tests.loop.store import (
    active_incident,
    demo_with_resolved,
    history,
    incidents_b,
    land,
    store_of,
    stored_lesson,
    write_estate_snapshot,
)

SALES = "urn:li:domain:sales"


def urn(name: str) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:postgres,{name},PROD)"


ORDERS = urn("shop.public.orders")


def dataset(
    name: str, *fields: tuple[str, str], upstreams: tuple[str, ...] = (), key: str | None = None
) -> DatasetContext:
    return DatasetContext(
        urn=urn(name),
        name=name,
        platform="postgres",
        domain=SALES,
        fields=tuple(
            FieldInfo(name=f, native_type=t.upper(), type=t, is_key=f == key) for f, t in fields
        ),
        upstreams=upstreams,
    )


def spec(field: str = "order_id", parent: str = ORDERS, parent_field: str = "order_id") -> dict:
    return {
        "type": "referential_integrity",
        "field": field,
        "references": {"dataset": parent, "field": parent_field},
    }


REFERENTIAL_INTEGRITY = ControlCase(
    type_name="referential_integrity",
    columns={"child": "order_id", "parent": "id", "amount": "amount"},
    make_spec=lambda c: spec(c["child"], ORDERS, c["parent"]),
    passing_rows=[
        {"child": 1, "amount": 10},
        {"child": 2, "amount": 20},
        {"child": 2, "amount": 21},
        {"child": None, "amount": 30},  # a NULL is never an orphan
    ],
    failing_rows=[
        {"child": 7, "amount": 1},
        {"child": 7, "amount": 2},
        {"child": 7, "amount": 3},
        {"child": 8, "amount": 4},
        {"child": 1, "amount": 5},
        {"child": None, "amount": 6},
    ],
    reference_rows=[{"parent": 1}, {"parent": 2}, {"parent": 3}, {"parent": None}],
    expected_violations=4,
    expected_first_sample={"missing_parent_value": "7", "occurrences": 3},
    invalid_specs=[
        ({"type": "referential_integrity", "field": "a"}, "references"),
        (
            {"type": "referential_integrity", "references": {"dataset": ORDERS, "field": "a"}},
            "field",
        ),
        (spec(parent="shop.public.orders"), "not a dataset urn"),
        (spec(parent="urn:li:dataset:(" + "x" * 1000 + ")"), "references.dataset"),
        ({**spec(), "references": {"dataset": ORDERS}}, "references.field"),
        ({**spec(), "references": {"dataset": ORDERS, "field": "a", "x": 1}}, "unknown key"),
        (spec(parent_field=""), "empty"),
        (spec(field=""), "empty"),
    ],
    bound_values=["shop.public.orders"],
)


@pytest.fixture
def kind_installed() -> None:
    """The kind is built in: registered through the package's own metadata."""
    assert ORPHANED_REFERENCES in {kind.pattern for kind in registered_kinds()}


class TestReferentialIntegrityControl(BaseLessonKindConformance):
    kind_pattern = ORPHANED_REFERENCES
    incident = IncidentText(
        urn="urn:li:incident:orphans",
        title="Orphaned order lines in shop.public.order_lines",
        description="Order lines pointed to deleted orders after the nightly purge.",
    )
    control_case = REFERENTIAL_INTEGRITY
    renaming: ClassVar[dict[str, str] | None] = {"order_id": "order_ref"}

    @pytest.fixture(autouse=True)
    def _installed(self, kind_installed: None) -> None:
        """The base suite asks the registry for the kind."""

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        """The estate below, whose orders name their key order_id like the lines."""
        catalog = InMemoryCatalog(estate())
        control = parse_control_spec(spec())
        query = SimilarityQuery(pattern=ORPHANED_REFERENCES, control=control, source_urn=LINES)
        return catalog, query


def estate() -> list[DatasetContext]:
    """raw.orders -> shop.public.orders (copied) -> lines -> line_taxes, and -> refunds;
    raw.orders -> returns; web.clicks has an order_id but no lineage to the orders."""
    return [
        dataset("raw.orders", ("order_id", "number"), key="order_id"),
        dataset(
            "shop.public.orders",
            ("order_id", "number"),
            ("customer_id", "number"),
            upstreams=(urn("raw.orders"),),
            key="order_id",
        ),
        dataset(
            "shop.public.lines",
            ("order_id", "number"),
            ("line_no", "number"),
            upstreams=(ORDERS,),
        ),
        dataset("shop.public.refunds", ("OrderID", "number"), upstreams=(ORDERS,)),
        dataset("shop.public.returns", ("order_id", "number"), upstreams=(urn("raw.orders"),)),
        dataset("shop.public.notes", ("order_id", "string"), upstreams=(ORDERS,)),
        dataset("web.clicks", ("order_id", "number")),
        dataset(
            "shop.public.line_taxes", ("order_id", "number"), upstreams=(urn("shop.public.lines"),)
        ),
    ]


# --- exact counts against a parent snapshot ------------------------------------------------------
def checked(
    tmp_path: Path,
    child: list[dict[str, Any]],
    parent: list[dict[str, Any]],
    suffixes=("parquet", "parquet"),
) -> Any:
    child_path = write_snapshot(tmp_path / f"child.{suffixes[0]}", child)
    parent_path = write_snapshot(tmp_path / f"parent.{suffixes[1]}", parent)
    reference = ReferenceSnapshot(SnapshotFile.from_path(parent_path), "given")
    return run_control(parse_control_spec(spec()), child_path, reference=reference)


@pytest.mark.parametrize(
    "suffixes",
    [("parquet", "parquet"), ("csv", "csv"), ("parquet", "csv"), ("csv", "parquet")],
)
def test_orphans_are_non_null_child_values_absent_from_the_parent(
    tmp_path: Path, suffixes: tuple[str, str]
) -> None:
    """Typed Parquet and text CSV, on either side, give the same counts: values of different
    types compare by their text."""
    child = [{"order_id": v} for v in (1, 1, 2, 5, 5, 5, 6, None, None)]
    parent = [{"order_id": v} for v in (1, 2, 3, None)]
    result = checked(tmp_path, child, parent, suffixes)
    assert (result.passed, result.violation_count, result.rows_scanned) == (False, 4, 9)
    assert result.sample == [
        {"missing_parent_value": "5", "occurrences": 3},
        {"missing_parent_value": "6", "occurrences": 1},
    ]
    assert result.reference is not None and result.reference.chosen == "given"


def test_a_null_in_the_parent_matches_nothing_and_a_null_child_is_no_orphan(tmp_path: Path) -> None:
    child = [{"order_id": None}, {"order_id": None}]
    parent = [{"order_id": None}]
    result = checked(tmp_path, child, parent)
    assert (result.passed, result.violation_count, result.sample) == (True, 0, [])


def test_a_parent_of_another_type_compares_by_text(tmp_path: Path) -> None:
    """A date parent and an integer child share no value's text: every non-NULL child orphans."""
    child = [{"order_id": 1}, {"order_id": 2}, {"order_id": None}]
    parent = [{"order_id": datetime.date(2026, 1, 1)}]
    result = checked(tmp_path, child, parent)
    assert result.violation_count == 2


def test_a_parent_snapshot_lacking_the_field_is_schema_drift_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SchemaDriftError) as raised:
        checked(tmp_path, [{"order_id": 1}], [{"id": 1}])
    assert raised.value.missing == ["order_id"]
    assert "parent.parquet" in str(raised.value)


def test_without_a_parent_snapshot_it_is_a_clear_error(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "child.parquet", [{"order_id": 1}])
    with pytest.raises(SnapshotNotFoundError, match="no snapshot of that dataset was given"):
        run_control(parse_control_spec(spec()), path)


# --- pairing child and parent snapshots by id ----------------------------------------------------
def write_history(folder: Path, snapshots: dict[str, list[Any]], failures: list[str] = ()) -> Path:
    folder.mkdir(parents=True)
    for snapshot_id, values in snapshots.items():
        write_snapshot(folder / f"{snapshot_id}.parquet", [{"order_id": v} for v in values])
    if failures:
        (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": list(failures)}))
    return folder


def test_the_backtest_pairs_each_child_snapshot_with_the_parent_of_its_id_or_before(
    tmp_path: Path,
) -> None:
    child = write_history(
        tmp_path / "lines",
        {
            "2026-01-01": [1],  # before every parent snapshot: not evaluable
            "2026-01-02": [1, 2],  # the parent's of the same id
            "2026-01-03": [1, 2, 3],  # the parent's latest before: 01-02 lacks 3 -> orphan
            "2026-01-04": [4, 4, None],  # the parent's of the same id
        },
        failures=["2026-01-03"],
    )
    parent = write_history(tmp_path / "orders", {"2026-01-02": [1, 2], "2026-01-04": [1, 2, 3, 4]})
    report = backtest(
        parse_control_spec(spec()), [load_history(child)], references={ORDERS: load_history(parent)}
    )
    outcomes = {o.snapshot_id: o for o in report.per_snapshot}
    assert not outcomes["2026-01-01"].evaluable
    assert outcomes["2026-01-01"].reason == "no snapshot of orders at or before 2026-01-01"
    assert [outcomes[s].violation_count for s in ("2026-01-02", "2026-01-03", "2026-01-04")] == [
        0,
        1,
        0,
    ]
    assert [outcomes[s].checked_against for s in sorted(outcomes)] == [
        None,
        "orders 2026-01-02 (the same snapshot id)",
        "orders 2026-01-02 (the latest at or before 2026-01-03)",
        "orders 2026-01-04 (the same snapshot id)",
    ]
    assert (
        "| lines | 2026-01-03 | caught (labelled failure) | 1 | checked against orders 2026-01-02 "
        "(the latest at or before 2026-01-03) |" in render_markdown(report)
    )
    assert (report.true_positives, report.false_positives, report.true_negatives) == (1, 0, 2)
    assert report.not_evaluable == 1


def test_without_the_parent_history_every_snapshot_is_not_evaluable_with_the_reason(
    tmp_path: Path,
) -> None:
    child = write_history(tmp_path / "lines", {"2026-01-01": [1]})
    report = backtest(parse_control_spec(spec()), [load_history(child)])
    [outcome] = report.per_snapshot
    assert not outcome.evaluable
    assert outcome.reason == f"no history of {ORDERS}, which it references"


def test_the_cli_runs_and_backtests_against_the_parent(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec()))
    child = write_history(tmp_path / "lines", {"2026-01-02": [1, 9, 9]}, failures=["2026-01-02"])
    parent = write_history(tmp_path / "orders", {"2026-01-01": [1]})
    runner = CliRunner()
    run = runner.invoke(
        cli,
        [
            "control",
            "run",
            str(spec_path),
            "--snapshot",
            str(child / "2026-01-02.parquet"),
            "--reference",
            str(parent / "2026-01-01.parquet"),
            "--json",
        ],
    )
    assert run.exit_code == 1, run.output
    result = json.loads(run.output)
    assert (result["violation_count"], result["sample"]) == (
        2,
        [{"missing_parent_value": "9", "occurrences": 2}],
    )
    assert result["reference"]["snapshot_id"] == "2026-01-01"
    missing = runner.invoke(
        cli, ["control", "run", str(spec_path), "--snapshot", str(child / "2026-01-02.parquet")]
    )
    assert missing.exit_code == 2 and "no snapshot of that dataset was given" in missing.output
    backtested = runner.invoke(
        cli,
        ["backtest", str(spec_path), "--history", str(child), "--reference-history", str(parent)],
    )
    assert backtested.exit_code == 0, backtested.output
    assert "| 2026-01-02 |" in backtested.output or "2026-01-02" in backtested.output
    as_json = runner.invoke(
        cli,
        [
            "backtest",
            str(spec_path),
            "--history",
            str(child),
            "--reference-history",
            str(parent),
            "--json",
        ],
    )
    assert json.loads(as_json.output)["true_positives"] == 1
    no_parent = runner.invoke(cli, ["backtest", str(spec_path), "--history", str(child)])
    assert no_parent.exit_code == 2 and "--reference-history" in no_parent.output


# --- drafting ------------------------------------------------------------------------------------
LINES = urn("shop.public.lines")
INCIDENT = IncidentText(
    urn="urn:li:incident:orphans",
    title="Orphaned order lines",
    description="After the purge, lines pointed at deleted orders.",
)


def draft_with_history(tmp_path: Path, text: IncidentText = INCIDENT) -> LessonDraft:
    lines = write_history(
        tmp_path / "lines",
        {"2026-02-01": [1, 2], "2026-02-02": [2, 3], "2026-02-03": [3, 77, 78]},
        failures=["2026-02-03"],
    )
    orders = write_history(
        tmp_path / "orders", {"2026-02-01": [1, 2], "2026-02-02": [1, 2, 3], "2026-02-03": [3]}
    )
    catalog = InMemoryCatalog(estate())
    histories = {ORDERS: load_history(orders)}
    facts = IncidentFacts(
        source=catalog.dataset(LINES),
        history=load_history(lines),
        catalog=catalog,
        histories=histories.get,
    )
    draft = DeterministicProposer().draft(text, facts)
    assert check_draft(draft, text, facts.source, catalog) == []
    return draft


def test_the_history_shows_which_parent_and_field_broke(tmp_path: Path) -> None:
    draft = draft_with_history(tmp_path)
    assert draft.failure_pattern == ORPHANED_REFERENCES
    assert draft.control == spec()
    [fact] = [e.quote for e in draft.evidence if e.source == "history"]
    assert fact == (
        "order_id in 2026-02-03 holds 2 rows whose value is absent from order_id of "
        "shop.public.orders (e.g. '77' (1), '78' (1)); in all 2 normal snapshots every value "
        "exists there"
    )


def test_without_history_the_parent_comes_from_lineage(tmp_path: Path) -> None:
    catalog = InMemoryCatalog(estate())
    facts = IncidentFacts(source=catalog.dataset(LINES), history=None, catalog=catalog)
    draft = DeterministicProposer().draft(INCIDENT, facts)
    assert draft.control == spec()
    assert [e.quote for e in draft.evidence if e.source == "catalog"] == [
        "shop.public.orders is upstream of the source and has order_id (NUMBER, key)"
    ]


def test_a_parent_the_words_name_is_found_without_lineage() -> None:
    clicks = dataset("web.clicks", ("order_id", "number"))
    orders = dataset("shop.public.orders", ("order_id", "number"), key="order_id")
    catalog = InMemoryCatalog([clicks, orders])
    text = IncidentText(
        urn="urn:li:incident:clicks",
        title="Clicks with orphaned order ids",
        description="Clicks referenced orders that shop.public.orders never had.",
    )
    facts = IncidentFacts(source=clicks, history=None, catalog=catalog)
    draft = DeterministicProposer().draft(text, facts)
    assert draft.control == spec()
    assert "named by the incident" in draft.evidence[-1].quote


def test_words_of_two_classes_are_settled_by_the_history(tmp_path: Path) -> None:
    """The text says NULLs and orphans; the history shows only orphans."""
    text = IncidentText(
        urn="urn:li:incident:orphans",
        title="Orphaned order lines and null values",
        description="Some lines had null values; others pointed at deleted orders.",
    )
    draft = draft_with_history(tmp_path, text)
    assert draft.failure_pattern == ORPHANED_REFERENCES


# --- validation against the catalog --------------------------------------------------------------
@pytest.mark.parametrize(
    ("control", "problem"),
    [
        (spec(parent=urn("shop.public.gone")), "is not in the catalog"),
        (spec(parent_field="order_no"), "referenced field 'order_no' does not exist"),
        (spec(field="line_no", parent_field="customer_id"), None),
    ],
)
def test_a_proposed_reference_is_checked_against_the_catalog(
    control: dict[str, Any], problem: str | None
) -> None:
    catalog = InMemoryCatalog(estate())
    draft = LessonDraft(
        failure_pattern=ORPHANED_REFERENCES,
        root_cause="Orphans.",
        control=control,
        confidence=0.5,
        rationale="",
    )
    problems = check_draft(draft, INCIDENT, catalog.dataset(LINES), catalog)
    assert (problems == []) if problem is None else (problem in problems[0]), problems


def test_a_referenced_field_of_an_incompatible_type_is_refused() -> None:
    notes = dataset("shop.public.notes", ("order_id", "string"), upstreams=(ORDERS,))
    catalog = InMemoryCatalog([*estate()[:2], notes])
    draft = LessonDraft(
        failure_pattern=ORPHANED_REFERENCES,
        root_cause="Orphans.",
        control=spec(),
        confidence=0.5,
        rationale="",
    )
    [problem] = check_draft(draft, INCIDENT, notes, catalog)
    assert problem == (
        "order_id (STRING) is string but the referenced order_id (NUMBER, key) of "
        "shop.public.orders is number"
    )


# --- similar assets ------------------------------------------------------------------------------
def test_similar_children_are_downstream_of_the_same_parent_with_the_path() -> None:
    catalog = InMemoryCatalog(estate())
    query = SimilarityQuery(
        pattern=ORPHANED_REFERENCES, control=parse_control_spec(spec()), source_urn=LINES
    )
    resolution = resolve_similar_assets(query, catalog)
    reasons = {c.name: c.explanation for c in resolution.candidates}
    assert set(reasons) == {"shop.public.refunds", "shop.public.returns", "shop.public.line_taxes"}
    assert (
        "downstream of shop.public.orders, the parent it references, through shop.public.lines"
        in reasons["shop.public.line_taxes"]
    )
    assert (
        "downstream of shop.public.orders, the parent it references"
        in reasons["shop.public.refunds"]
    )
    assert (
        "downstream of raw.orders, which shop.public.orders (the parent it references) was "
        "copied from" in reasons["shop.public.returns"]
    )
    refunds = next(c for c in resolution.candidates if c.name == "shop.public.refunds")
    assert refunds.field_mapping == {"order_id": "OrderID"}
    excluded = {e.name: e.reason for e in resolution.excluded}
    assert excluded["shop.public.orders"] == "it is the dataset the control references"
    assert excluded["web.clicks"] == (
        "not downstream of shop.public.orders: its values have no parent to check"
    )
    assert excluded["shop.public.notes"].startswith("incompatible type")


# --- the whole loop on the embedded store --------------------------------------------------------
ORPHAN_INCIDENT = "urn:li:incident:order-lines-orphaned"
ORPHAN_NOTE = (
    "The nightly purge now keeps orders that still have lines; the orphaned order lines of "
    "2026-09-14 were restored with their orders."
)
SALES_ORDERS, SALES_LINES, SALES_INVOICES, SALES_RETURNS = (
    dataset_urn(name)
    for name in ("sales.orders", "sales.order_lines", "sales.invoices", "sales.returns")
)
#: snapshot id -> order ids, per dataset: 2026-09-14's lines point at purged orders
ORDER_HISTORIES: dict[str, dict[str, list[str | None]]] = {
    "sales.orders": {
        "2026-09-12": ["o1", "o2"],
        "2026-09-13": ["o1", "o2", "o3"],
        "2026-09-14": ["o3", "o4"],  # the purge removed o1 and o2
    },
    "sales.order_lines": {
        "2026-09-12": ["o1", "o1", "o2"],
        "2026-09-13": ["o2", "o3", None],
        "2026-09-14": ["o1", "o2", "o2", "o4"],
    },
    "sales.invoices": {"2026-09-13": ["o1", "o3"], "2026-09-14": ["o3", "o4"]},
}


def write_order_ids(path: Path, name: str, order_ids: list[str | None]) -> Path:
    """A snapshot of estate dataset ``name`` with these order ids, NULL elsewhere."""
    return write_estate_snapshot(path, name, {"order_id": order_ids})


def resolved_orphan_incident(workdir: Path) -> Demo:
    workdir.mkdir()
    for name, snapshots in ORDER_HISTORIES.items():
        for snapshot_id, order_ids in snapshots.items():
            write_order_ids(
                workdir / "snapshots" / name / f"{snapshot_id}.parquet", name, order_ids
            )
    labels = {"failures": [{"snapshot": "2026-09-14", "incident": ORPHAN_INCIDENT}]}
    (workdir / "snapshots" / "sales.order_lines" / "labels.yaml").write_text(yaml.safe_dump(labels))
    incident = active_incident(
        ORPHAN_INCIDENT,
        SALES_LINES,
        "Orphaned order lines in sales.order_lines",
        "Fulfilment found lines pointing at deleted orders after the nightly purge.",
    )
    return demo_with_resolved(workdir, incident, ORPHAN_NOTE)


def land_order_ids(demo: Demo, name: str, order_ids: list[str | None], day: str) -> Path:
    folder = demo.workdir / "snapshots" / LANDING_FOLDER / name
    return write_order_ids(folder / f"{day}.parquet", name, order_ids)


def test_orphaned_order_lines_close_the_loop_on_invoices(tmp_path: Path) -> None:
    demo = resolved_orphan_incident(tmp_path / "demo")
    store = store_of(demo.workdir)
    try:
        lesson = demo.lesson(ORPHAN_INCIDENT)
        assert (lesson.failure_pattern, lesson.proposer.name) == (
            ORPHANED_REFERENCES,
            "deterministic",
        )
        assert lesson.control == {
            "type": "referential_integrity",
            "field": "order_id",
            "references": {"dataset": SALES_ORDERS, "field": "order_id"},
        }
        assert (
            "history",
            "order_id in 2026-09-14 holds 3 rows whose value is absent from order_id of "
            "sales.orders (e.g. 'o2' (2), 'o1' (1)); in all 2 normal snapshots every value "
            "exists there",
        ) in {(e.source, e.quote) for e in lesson.evidence}

        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        lesson = demo.lesson(ORPHAN_INCIDENT)
        assert lesson.state is LessonState.PENDING_APPROVAL
        assert (
            "| sales.invoices | 0.80 | yes | shares domain sales; has order_id (VARCHAR) like the "
            "source; downstream of sales.orders, the parent it references; same platform "
            "snowflake; not yet covered |"
        ) in lesson.report
        assert (
            "| sales.returns | 0.70 | yes | shares domain sales; has order_id (VARCHAR) like the "
            "source; downstream of sales.orders, the parent it references, through "
            "sales.order_lines; same platform snowflake; not yet covered |"
        ) in lesson.report
        assert (
            "- logistics.shipments: not downstream of sales.orders: its values have no parent "
            "to check" in lesson.report
        )
        assert "- sales.orders: it is the dataset the control references" in lesson.report
        # the invoices of 2026-09-13 pair with the orders of that day; o1 exists there
        assert (
            "**Recommended scope** (3 datasets): precision 100%, recall 100%, 1 labelled "
            "failure caught, 0 false alarms, 0 missed, 0 snapshots not evaluable."
        ) in lesson.report

        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = demo.lesson(ORPHAN_INCIDENT)
        assert lesson.state is LessonState.PUBLISHED
        assert set(lesson.published_scope) == {SALES_LINES, SALES_INVOICES, SALES_RETURNS}

        day = LANDING_DAY.isoformat()
        # lines whose orders all exist in the orders' latest snapshot (2026-09-14) pass
        land(demo, SALES_LINES, land_order_ids(demo, "sales.order_lines", ["o3", None], day), day)
        demo.react()
        # the orders land too, with o5; invoices of that day name o5 and a purged o1
        land_order_ids(demo, "sales.orders", ["o3", "o4", "o5"], day)
        invoices = land_order_ids(demo, "sales.invoices", ["o5", "o1", "o1", None], day)
        land(demo, SALES_INVOICES, invoices, day)
        demo.react()
        assert incidents_b(store, SALES_LINES) == {}
        [(incident, info)] = incidents_b(store, SALES_INVOICES).items()
        assert info.source is not None
        assert info.source.sourceUrn == assertion_urn(lesson.urn, SALES_INVOICES)
        description = info.description or ""
        assert "2 violation(s) in 4 row(s)" in description
        assert '- `{"missing_parent_value": "o1", "occurrences": 2}`' in description
        assert f"Checked against sales.orders snapshot {day} (the same snapshot id)." in description
        [(_, run)] = history(store, assertion_urn(lesson.urn, SALES_LINES), AssertionRunEventClass)
        assert run.result is not None and run.result.nativeResults is not None
        assert run.result.nativeResults["reference_snapshot_id"] == "2026-09-14"
        assert run.result.nativeResults["reference_chosen"] == f"the latest at or before {day}"
        [recurrence] = stored_lesson(store, lesson.urn).recurrences
        assert (recurrence.incident, recurrence.dataset) == (incident, SALES_INVOICES)

        # a landing older than every orders snapshot cannot be checked: an ERROR run, no incident
        early = land_order_ids(demo, "sales.invoices", ["o9"], "2026-01-01")
        land(demo, SALES_INVOICES, early, "2026-01-01")
        demo.react()
        runs = history(store, assertion_urn(lesson.urn, SALES_INVOICES), AssertionRunEventClass)
        error = runs[-1][1].result
        assert error is not None and error.type == "ERROR" and error.error is not None
        assert error.error.properties == {
            "message": "sales.orders, the dataset this control references, has no snapshot "
            "'2026-01-01' or earlier"
        }
        assert len(incidents_b(store, SALES_INVOICES)) == 1
    finally:
        demo.catalog.close()


# --- the LLM proposer ----------------------------------------------------------------------------
def test_an_llm_reference_is_validated_against_the_catalog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model sees the upstreams it may reference; a parent not in the catalog is refused
    and the corrected answer is taken (litellm's own mock_response, no network)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from reflex_actions.lessons.llm import LlmConfig, LlmProposer
    from tests.lessons.test_llm import Scripted

    def answer(parent: str) -> str:
        return json.dumps(
            {
                "failure_pattern": ORPHANED_REFERENCES,
                "root_cause": "The purge deleted orders that still had lines.",
                "evidence": [{"source": "title", "quote": "Orphaned order lines"}],
                "control": spec(parent=parent),
                "confidence": 0.8,
                "rationale": "Lines point at deleted orders.",
            }
        )

    catalog = InMemoryCatalog(estate())
    facts = IncidentFacts(source=catalog.dataset(LINES), history=None, catalog=catalog)
    script = Scripted(answer(urn("shop.public.gone")), answer(ORDERS))
    proposer = LlmProposer(LlmConfig(model="openai/gpt-4o-mini"), completion=script)
    draft, info = proposer.propose(INCIDENT, facts)
    assert (info.name, draft.control) == ("llm", spec())
    facts_sent = json.loads(script.calls[0][1]["content"])
    assert facts_sent["dataset"]["upstreams"] == [
        {
            "urn": ORDERS,
            "fields": [
                {"name": "order_id", "type": "NUMBER", "key": True},
                {"name": "customer_id", "type": "NUMBER", "key": False},
            ],
        }
    ]
    refusal = script.calls[1][-1]["content"]
    assert "shop.public.gone,PROD)' is not in the catalog" in refusal


@pytest.mark.parametrize(
    ("child", "parent", "orphans"),
    [
        # a typed child against a text parent: read in the child's type only where the text
        # is that value's one spelling, so '007', ' 8' and '12.0' match nothing
        ([1, 7, 8, 12, None], ["1", "007", " 8", "12.0", "abc", None], ["12", "7", "8"]),
        (
            [datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)],
            ["2026-01-01", "2026-1-2"],
            ["2026-01-02"],
        ),
        ([1.5, 2.0], ["1.5", "2"], ["2.0"]),  # a float has no one spelling: text compares
    ],
)
def test_a_typed_child_against_a_text_parent_compares_as_text(
    tmp_path: Path, child: list[Any], parent: list[Any], orphans: list[str]
) -> None:
    child_path = write_snapshot(tmp_path / "child.parquet", [{"order_id": v} for v in child])
    parent_path = write_snapshot(tmp_path / "parent.csv", [{"order_id": v} for v in parent])
    reference = ReferenceSnapshot(SnapshotFile.from_path(parent_path), "given")
    result = run_control(parse_control_spec(spec()), child_path, reference=reference)
    assert sorted(row["missing_parent_value"] for row in result.sample) == orphans
    assert result.violation_count == len(orphans)


# --- one tree, every dialect ---------------------------------------------------------------------
HOSTILE_CHILD, HOSTILE_PARENT = 'order"id; DROP TABLE t; --', "select"


def hostile_control() -> Any:
    return parse_control_spec(spec(HOSTILE_CHILD, ORDERS, HOSTILE_PARENT))


@pytest.mark.parametrize(
    ("child_type", "parent_type", "dialects"),
    [
        ("BIGINT", "BIGINT", RENDERED_DIALECTS),  # compared natively
        ("DATE", "VARCHAR", RENDERED_DIALECTS),  # the parent's text read as a date
        ("DOUBLE", "BIGINT", RENDERED_DIALECTS),  # by text
        (None, None, RENDERED_DIALECTS),  # types unknown: by text
    ],
)
def test_counts_and_sample_render_in_every_dialect(
    child_type: str | None, parent_type: str | None, dialects: list[str]
) -> None:
    """The same tree renders, parses back, quotes both fields the dialect's way and binds the
    partition's value, whichever comparison the types call for."""
    relation = table_relation(
        {HOSTILE_CHILD: child_type} if child_type else {},
        {HOSTILE_PARENT: parent_type} if parent_type else {},
    )
    texts = check_every_dialect(
        hostile_control(), relation, [HOSTILE_CHILD, HOSTILE_PARENT], ["2026-01-01"], dialects
    )
    for dialect, (counts, sample) in texts.items():
        # PostgreSQL has no soft cast: only text of a date's shape is cast there
        shape = f"~ '{text_form('DATE')}' THEN CAST("
        safe_cast = {"bigquery": "SAFE_CAST(", "postgres": shape}.get(dialect, "TRY_CAST(")
        assert (safe_cast in counts) == (child_type == "DATE"), (dialect, counts)
        assert "LIMIT 5" in sample and "ANTI" not in counts + sample, (dialect, sample)


def test_a_typed_parent_text_is_cast_safely_and_checked_to_round_trip() -> None:
    """A date child against a text parent reads the parent's text of a date's shape as a
    DATE, where that text prints back as itself; a native pair compares the columns as they
    are."""
    typed = table_relation({HOSTILE_CHILD: "DATE"}, {HOSTILE_PARENT: "VARCHAR"})
    counts = rendered(hostile_control(), typed, "duckdb")[0][0]
    text, shape = 'CAST(parent."select" AS TEXT)', f"'{text_form('DATE')}'"
    typed_value = f"CASE WHEN REGEXP_MATCHES({text}, {shape}) THEN TRY_CAST({text} AS DATE) END"
    assert f"SELECT DISTINCT {typed_value} AS parent_value" in counts
    assert f"WHERE CAST({typed_value} AS TEXT) = {text}" in counts
    native = table_relation({HOSTILE_CHILD: "BIGINT"}, {HOSTILE_PARENT: "BIGINT"})
    assert "CAST(" not in rendered(hostile_control(), native, "duckdb")[0][0]


@pytest.mark.parametrize("suffixes", [("parquet", "parquet"), ("parquet", "csv")])
def test_a_passing_check_fetches_only_its_counts(tmp_path: Path, suffixes: tuple[str, str]) -> None:
    """The sample of missing parents is built only when there are orphans."""
    parent = write_snapshot(tmp_path / f"parent.{suffixes[1]}", [{"order_id": v} for v in (1, 2)])
    reference = ReferenceSnapshot(SnapshotFile.from_path(parent), "given")
    for rows, fetches in (((1, 2, None), 1), ((1, 3, 3, 4), 2)):
        child = write_snapshot(tmp_path / f"child.{suffixes[0]}", [{"order_id": v} for v in rows])
        engine = RecordingEngine()
        result = run_control(parse_control_spec(spec()), child, engine=engine, reference=reference)
        assert len(engine.fetched) == fetches, engine.fetched
        assert result.passed == (fetches == 1)
    assert result.sample == [
        {"missing_parent_value": "3", "occurrences": 2},
        {"missing_parent_value": "4", "occurrences": 1},
    ]


@pytest.mark.parametrize(
    ("child_type", "values"),
    [
        ("DATE", ["0044-03-15 (BC)", "12026-01-01", "infinity", "-infinity", "2026-01-01"]),
        ("TIMESTAMP", ["0044-03-15 (BC) 10:00:00", "2026-01-01 10:00:00.5", "infinity"]),
        ("DECIMAL(2,2)", [".50", "-.25"]),
        ("DECIMAL(4,1)", ["-5.0", "123.4"]),
        ("BIGINT", ["-9223372036854775808", "0"]),
        ("UUID", ["360790d3-d1cd-4451-9d1b-79f6dd437fcb"]),
        ("BOOLEAN", ["true", "false"]),
    ],
)
def test_every_text_form_duckdb_prints_is_read_in_the_child_type(
    tmp_path: Path, child_type: str, values: list[str]
) -> None:
    """The shape a parent's text must have to be cast admits each spelling DuckDB writes for a
    value of the child's type (BC dates, infinities, a decimal's bare fraction): a child value
    is never an orphan of the text its own type prints."""
    import duckdb

    child = tmp_path / "child.parquet"
    rows = ", ".join(f"(CAST('{value}' AS {child_type}))" for value in values)
    duckdb.execute(f"COPY (SELECT * FROM (VALUES {rows}) AS t(order_id)) TO '{child}'")
    parent = write_snapshot(tmp_path / "parent.csv", [{"order_id": v} for v in values])
    reference = ReferenceSnapshot(SnapshotFile.from_path(parent), "given")
    result = run_control(parse_control_spec(spec()), child, reference=reference)
    assert (result.passed, result.rows_scanned) == (True, len(values)), result.sample
