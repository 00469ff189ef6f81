"""The invalid-values kind: its two controls (``accepted_values``, ``value_range``) pass the kind
conformance suite, count exactly on Parquet and CSV, are drafted from the history's evidence, and
close the embedded loop."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from reflex_actions.backtest import backtest, load_history
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.controls import parse_control_spec
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER
from reflex_actions.demo.run import Demo
from reflex_actions.executor import run_control
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.kinds.invalid_values import INVALID_VALUES, discover_value_findings
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText, LessonState
from reflex_actions.registry import registered_kinds
from reflex_actions.similarity import SimilarityQuery
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.sql import ControlQuery, Relation, exp
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.conformance.control_cases import ControlCase
from tests.conftest import write_snapshot
from tests.loop.store import (
    active_incident,
    demo_with_resolved,
    incidents_b,
    land,
    store_of,
    stored_lesson,
    write_estate_snapshot,
)

FINANCE = "urn:li:domain:finance"


@pytest.fixture
def kind_installed() -> None:
    """The kind is built in: registered through the package's own metadata."""
    assert INVALID_VALUES in {kind.pattern for kind in registered_kinds()}


ACCEPTED_VALUES = ControlCase(
    type_name="accepted_values",
    columns={"value": "currency", "amount": "amount"},
    make_spec=lambda c: {
        "type": "accepted_values",
        "field": c["value"],
        "values": ["EUR", "GBP", "USD"],
    },
    passing_rows=[
        {"value": "EUR", "amount": 1},
        {"value": "GBP", "amount": 2},
        {"value": "USD", "amount": 3},
        {"value": None, "amount": 4},  # a NULL is never an invalid value
    ],
    failing_rows=[
        {"value": "XXX", "amount": 1},
        {"value": "XXX", "amount": 2},
        {"value": "XXX", "amount": 3},
        {"value": "eur", "amount": 4},  # texts compare exactly
        {"value": "EUR", "amount": 5},
        {"value": None, "amount": 6},
    ],
    expected_violations=4,
    expected_first_sample={"value": "XXX", "occurrences": 3},
    invalid_specs=[
        ({"type": "accepted_values", "field": "c"}, "values"),
        ({"type": "accepted_values", "field": "c", "values": []}, "values"),
        ({"type": "accepted_values", "field": "c", "values": ["EUR", "EUR"]}, "twice"),
        ({"type": "accepted_values", "field": "c", "values": [1, 1.0]}, "twice"),
        ({"type": "accepted_values", "field": "c", "values": [True]}, "values.0"),
        ({"type": "accepted_values", "field": "c", "values": [None]}, "values.0"),
        ({"type": "accepted_values", "field": "c", "values": [float("nan")]}, "values.0"),
        ({"type": "accepted_values", "field": "c", "values": [2**60]}, "values.0"),
        ({"type": "accepted_values", "field": "c", "values": ["x" * 1001]}, "values.0"),
        ({"type": "accepted_values", "field": "c", "values": list(range(1001))}, "values"),
        ({"type": "accepted_values", "field": "", "values": ["a"]}, "empty"),
    ],
    bound_values=["EUR", "GBP", "USD"],
)

VALUE_RANGE = ControlCase(
    type_name="value_range",
    columns={"value": "amount_minor", "currency": "currency"},
    make_spec=lambda c: {"type": "value_range", "field": c["value"], "min": 0, "max": 123456},
    passing_rows=[
        {"value": 0, "currency": "EUR"},
        {"value": 500, "currency": "EUR"},
        {"value": 123456, "currency": "GBP"},  # both bounds are inclusive
        {"value": None, "currency": "USD"},
    ],
    failing_rows=[
        {"value": -5, "currency": "EUR"},
        {"value": -5, "currency": "EUR"},
        {"value": 123457, "currency": "GBP"},
        {"value": 1, "currency": "USD"},
        {"value": None, "currency": "USD"},
    ],
    expected_violations=3,
    expected_first_sample={"value": "-5", "occurrences": 2},
    invalid_specs=[
        ({"type": "value_range", "field": "a"}, "give 'min', 'max' or both"),
        ({"type": "value_range", "field": "a", "min": 5, "max": 1}, "greater than max"),
        ({"type": "value_range", "field": "a", "min": True}, "min"),
        ({"type": "value_range", "field": "a", "max": "10"}, "max"),
        ({"type": "value_range", "field": "a", "max": float("inf")}, "max"),
        ({"type": "value_range", "field": "a", "min": -(2**60)}, "min"),
        ({"type": "value_range", "field": "", "min": 0}, "empty"),
    ],
    bound_values=["123456"],
)


def dataset(name: str, *fields: tuple[str, str]) -> DatasetContext:
    return DatasetContext(
        urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
        name=name,
        platform="snowflake",
        domain=FINANCE,
        fields=tuple(FieldInfo(name=f, native_type=t.upper(), type=t) for f, t in fields),
    )


class InvalidValuesCases:
    """What both control types' conformance classes share: the kind installed, an estate."""

    kind_pattern = INVALID_VALUES
    control_case: ClassVar[ControlCase]

    @pytest.fixture(autouse=True)
    def _installed(self, kind_installed: None) -> None:
        """The base suite asks the registry for the kind."""

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        field = self.control_case.columns["value"]
        source = dataset("payments", (field, "string"), ("amount", "number"))
        catalog = InMemoryCatalog(
            [source, dataset("fx_rates", (field, "string")), dataset("web", ("page", "string"))]
        )
        query = SimilarityQuery(
            pattern=INVALID_VALUES, control=self.control(), source_urn=source.urn
        )
        return catalog, query


class TestAcceptedValuesControl(InvalidValuesCases, BaseLessonKindConformance):
    incident = IncidentText(
        urn="urn:li:incident:currency",
        title="Unknown currency codes in payments",
        description="The gateway sent invalid values such as XXX in the currency column.",
    )
    control_case = ACCEPTED_VALUES
    renaming: ClassVar[dict[str, str] | None] = {"currency": "ccy"}


class TestValueRangeControl(InvalidValuesCases, BaseLessonKindConformance):
    incident = IncidentText(
        urn="urn:li:incident:amounts",
        title="Negative amounts in refunds",
        description="A sign bug wrote amount_minor out of range for a day of refunds.",
    )
    control_case = VALUE_RANGE
    renaming: ClassVar[dict[str, str] | None] = {"amount_minor": "amount_cents"}


# --- exact counts of the controls ----------------------------------------------------------------
def result_of(spec: dict[str, Any], path: Path) -> tuple[int, int, list[dict[str, Any]]]:
    result = run_control(parse_control_spec(spec), path)
    return result.rows_scanned, result.violation_count, result.sample


@pytest.mark.usefixtures("kind_installed")
def test_accepted_values_counts_non_null_unlisted_values_worst_first(
    tmp_path: Path, snapshot_format: str
) -> None:
    rows = [{"status": s} for s in ["ok", "ok", None, None, "", "lost", "gone", "gone", "OK"]]
    path = write_snapshot(tmp_path / f"s.{snapshot_format}", rows)
    spec = {"type": "accepted_values", "field": "status", "values": ["ok", "pending", ""]}
    # CSV reads an empty field as NULL, Parquet keeps the empty text: both accept it
    assert result_of(spec, path) == (
        9,
        4,
        [
            {"value": "gone", "occurrences": 2},
            {"value": "OK", "occurrences": 1},
            {"value": "lost", "occurrences": 1},
        ],
    )


@pytest.mark.usefixtures("kind_installed")
def test_accepted_numbers_match_the_same_number_in_any_spelling(
    tmp_path: Path, snapshot_format: str
) -> None:
    rows = [{"code": c} for c in [1.0, 2.5, 3.0, 3.0, None]]
    path = write_snapshot(tmp_path / f"s.{snapshot_format}", rows)
    spec = {"type": "accepted_values", "field": "code", "values": [1, 2.5, "4"]}
    rows_scanned, violations, sample = result_of(spec, path)
    assert (rows_scanned, violations, [s["occurrences"] for s in sample]) == (5, 2, [2])
    assert float(sample[0]["value"]) == 3.0


@pytest.mark.usefixtures("kind_installed")
def test_a_value_range_counts_values_below_above_and_not_numbers(
    tmp_path: Path, snapshot_format: str
) -> None:
    rows = [{"amount": a} for a in ["-1", "0", "10", "10.5", "11", "n/a", "n/a", None]]
    path = write_snapshot(tmp_path / f"s.{snapshot_format}", rows)
    both = {"type": "value_range", "field": "amount", "min": 0, "max": 10.5}
    assert result_of(both, path) == (
        8,
        4,
        [
            {"value": "n/a", "occurrences": 2},
            {"value": "-1", "occurrences": 1},
            {"value": "11", "occurrences": 1},
        ],
    )
    assert result_of({"type": "value_range", "field": "amount", "min": 0}, path)[1] == 3
    assert result_of({"type": "value_range", "field": "amount", "max": 10}, path)[1] == 4


@pytest.mark.usefixtures("kind_installed")
def test_a_value_range_is_the_same_on_typed_parquet_and_text_csv(tmp_path: Path) -> None:
    decimals = pa.array(
        [Decimal("-1.00"), Decimal("0.00"), Decimal("250.00"), None], pa.decimal128(18, 2)
    )
    parquet = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"amount": decimals}), parquet)
    csv = write_snapshot(
        tmp_path / "text.csv", [{"amount": a} for a in ["-1.00", "0", "250", None]]
    )
    spec = {"type": "value_range", "field": "amount", "min": 0, "max": 100}
    assert result_of(spec, parquet)[:2] == result_of(spec, csv)[:2] == (4, 2)


def casts_in_filters(query: ControlQuery) -> set[str]:
    """The casts of a column in a compiled control's WHERE clauses (a bound value cast to the
    column's type is none): what every row read pays before it is compared."""
    trees = [tree for tree in (query.counts, query.sample) if tree is not None]
    wheres = [where for tree in trees for where in tree.find_all(exp.Where)]
    return {
        cast.sql("duckdb")
        for where in wheres
        for cast in where.find_all(exp.Cast)
        if cast.find(exp.Column) is not None
    }


TYPED_AMOUNTS = {
    "DECIMAL(18,2)": pa.array(
        [Decimal(v) if v else None for v in ["-1.00", "0.00", "10.50", "10.51", "250.00", None]],
        pa.decimal128(18, 2),
    ),
    "BIGINT": pa.array([-1, 0, 10, 11, 250, None], pa.int64()),
    "TINYINT": pa.array([-1, 0, 10, 11, 120, None], pa.int8()),
    "DOUBLE": pa.array([-1.0, 0.0, 10.5, 10.51, float("nan"), None], pa.float64()),
}


@pytest.mark.usefixtures("kind_installed")
@pytest.mark.parametrize("column_type", list(TYPED_AMOUNTS))
@pytest.mark.parametrize(
    ("bounds", "native"),
    [
        ({"min": 0, "max": 10.5}, {"DECIMAL(18,2)", "DOUBLE"}),  # 10.5 is no integer
        ({"min": 0, "max": 250}, {"DECIMAL(18,2)", "BIGINT", "DOUBLE"}),  # 250 > TINYINT's 127
        ({"max": 10.505}, {"DOUBLE"}),  # three decimals: more than DECIMAL(18,2) holds
        ({"min": -1}, set(TYPED_AMOUNTS)),  # a NaN DOUBLE is below nothing
    ],
)
def test_a_typed_column_is_compared_in_its_own_type_only_when_that_changes_nothing(
    tmp_path: Path, column_type: str, bounds: dict[str, float], native: set[str]
) -> None:
    """A numeric Parquet column is compared natively, its filter casting no row, when it is a
    DOUBLE or its integer or DECIMAL type holds the bounds exactly; either way the counts are
    those of its values read as DOUBLEs from a CSV's text."""
    values = TYPED_AMOUNTS[column_type]
    parquet = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"amount": values}), parquet)
    texts = ["nan" if v != v else v for v in values.to_pylist()]  # a NaN is not equal to itself
    csv = write_snapshot(tmp_path / "text.csv", [{"amount": v} for v in texts])
    spec = {"type": "value_range", "field": "amount", **bounds}
    assert result_of(spec, parquet)[:2] == result_of(spec, csv)[:2]
    relation = SnapshotFile(parquet, "parquet").relation(types={"amount": column_type})
    casts = casts_in_filters(parse_control_spec(spec).compile(relation))
    assert (casts == set()) == (column_type in native), casts


@pytest.mark.usefixtures("kind_installed")
@pytest.mark.parametrize(
    ("spec", "violations", "shown"),
    [
        ({"type": "value_range", "max": 3}, 1, ["nan"]),  # a NaN is above every number...
        ({"type": "value_range", "min": 0, "max": 3}, 1, ["nan"]),
        ({"type": "value_range", "min": 5}, 2, ["1.0", "3.0"]),  # ... so below no minimum
        ({"type": "accepted_values", "values": [1, 3]}, 1, ["nan"]),
    ],
)
def test_a_double_column_compared_natively_counts_a_nan_as_its_text_does(
    tmp_path: Path, spec: dict[str, Any], violations: int, shown: list[str]
) -> None:
    """A DOUBLE Parquet column is compared natively although its statistics leave the NaN out
    (min 1, max 3): DuckDB is told so, and prunes no row group a NaN meets a filter in, nor
    drops a filter every counted number meets. Its CSV text, still read as DOUBLEs, counts
    alike."""
    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.table({"amount": pa.array([1.0, float("nan"), 3.0, None])}), parquet)
    csv = write_snapshot(tmp_path / "d.csv", [{"amount": a} for a in ["1.0", "nan", "3.0", None]])
    spec = {**spec, "field": "amount"}
    for path in (parquet, csv):
        rows, count, sample = result_of(spec, path)
        assert (rows, count, [row["value"] for row in sample]) == (4, violations, shown), path
    control = parse_control_spec(spec)
    on_parquet = SnapshotFile(parquet, "parquet").relation(types={"amount": "DOUBLE"})
    on_csv = SnapshotFile(csv, "csv").relation(types={"amount": "VARCHAR"})
    assert casts_in_filters(control.compile(on_parquet)) == set()
    assert casts_in_filters(control.compile(on_csv)) != set()


@pytest.mark.usefixtures("kind_installed")
def test_a_double_is_read_as_its_text_where_a_filter_may_miss_a_nan() -> None:
    """An engine whose filters prune by statistics that leave NaNs out (Spark on Parquet) reads
    a DOUBLE's text as a DOUBLE, as for a type it does not know."""
    control = parse_control_spec({"type": "value_range", "field": "amount", "max": 3})
    unknown = control.compile(Relation.of("SELECT * FROM t"))
    pruned = control.compile(Relation.of("SELECT * FROM t", types={"amount": "DOUBLE"}))
    seen = Relation.of("SELECT * FROM t", types={"amount": "DOUBLE"}, filters_see_nans=True)
    assert casts_in_filters(pruned) == casts_in_filters(unknown) != set()
    assert casts_in_filters(control.compile(seen)) == set()


@pytest.mark.usefixtures("kind_installed")
def test_a_float_is_read_as_its_text_the_double_nearest_to_it_is_another_number(
    tmp_path: Path,
) -> None:
    """A FLOAT's text is its shortest spelling (0.1), not the DOUBLE it widens to
    (0.10000000149...): compared natively, 0.1 would be above a maximum of 0.1."""
    parquet = tmp_path / "f.parquet"
    pq.write_table(pa.table({"ratio": pa.array([0.1, 0.5], pa.float32())}), parquet)
    spec = {"type": "value_range", "field": "ratio", "max": 0.1}
    assert result_of(spec, parquet) == (2, 1, [{"value": "0.5", "occurrences": 1}])
    relation = SnapshotFile(parquet, "parquet").relation(types={"ratio": "FLOAT"})
    assert casts_in_filters(parse_control_spec(spec).compile(relation)) != set()


@pytest.mark.usefixtures("kind_installed")
def test_a_nan_is_outside_every_range_in_a_backtest_too(tmp_path: Path) -> None:
    """Parquet statistics leave NaNs out; a backtest (column types unknown) still counts it."""
    folder = tmp_path / "prices"
    folder.mkdir()
    for day, prices in {"d1": [1.0, 2.0], "d2": [1.0, float("nan"), 3.0]}.items():
        pq.write_table(
            pa.table({"price": pa.array(prices, pa.float64())}), folder / f"{day}.parquet"
        )
    spec = {"type": "value_range", "field": "price", "min": 0, "max": 250}
    report = backtest(parse_control_spec(spec), [load_history(folder)])
    counts = {o.snapshot_id: (o.violation_count, o.sample) for o in report.per_snapshot}
    assert counts == {"d1": (0, []), "d2": (1, [{"value": "nan", "occurrences": 1}])}


@pytest.mark.usefixtures("kind_installed")
def test_the_sql_binds_every_value() -> None:
    control = parse_control_spec(
        {"type": "accepted_values", "field": "ccy", "values": ["EUR'; DROP TABLE t; --", 7]}
    )
    relation = SnapshotFile(Path("x.parquet"), "parquet").relation()
    query = control.compile(relation)
    sql = query.shown(relation)
    assert "DROP" not in sql and "7" not in sql
    assert query.params == {"accepted_0": "EUR'; DROP TABLE t; --", "accepted_1": 7.0}


@pytest.mark.usefixtures("kind_installed")
def test_describe_is_one_readable_line() -> None:
    listed = parse_control_spec(
        {"type": "accepted_values", "field": "ccy", "values": [f"C{i}" for i in range(12)]}
    )
    assert listed.describe() == "ccy is one of C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 and 2 more"
    ranged = parse_control_spec({"type": "value_range", "field": "amount", "min": 0})
    assert ranged.describe() == "amount is a number of at least 0"


# --- evidence from the history -------------------------------------------------------------------
PAYMENTS_FIELDS = (
    FieldInfo(name="transaction_id", type="string", is_key=True),
    FieldInfo(name="currency", type="string"),
    FieldInfo(name="amount_minor", type="number"),
)
INCIDENT = "urn:li:incident:bad-values"


def write_history(
    folder: Path, snapshots: dict[str, list[tuple[str | None, int | None]]], failed: list[str]
) -> Path:
    """Snapshots of (currency, amount_minor) rows, each with a new transaction id, CSV for the
    odd days so the evidence reads both formats; ``failed`` labelled with :data:`INCIDENT`."""
    for day, (snapshot_id, rows) in enumerate(snapshots.items()):
        suffix = "csv" if day % 2 else "parquet"
        records = [
            {"transaction_id": f"{snapshot_id}-{i}", "currency": c, "amount_minor": a}
            for i, (c, a) in enumerate(rows)
        ]
        write_snapshot(folder / f"{snapshot_id}.{suffix}", records)
    labels = {"failures": [{"snapshot": s, "incident": INCIDENT} for s in failed]}
    (folder / "labels.yaml").write_text(yaml.safe_dump(labels))
    return folder


NORMAL_DAY = [("EUR", 1200), ("GBP", 0), ("USD", 9_512_000), (None, None)]


def test_new_values_in_the_incident_snapshot_give_the_normal_set(tmp_path: Path) -> None:
    history = write_history(
        tmp_path / "payments",
        {
            "d1": NORMAL_DAY,
            "d2": [("EUR", 50), ("EUR", 60)],
            "d3": [("XXX", 70), ("XXX", 80), ("eur", 90), ("EUR", 10)],
            "d4": NORMAL_DAY,
            "d5": [("ZZZ", 5)],  # another incident's failure: neither normal nor this one's
        },
        failed=["d3"],
    )
    (history / "labels.yaml").write_text(
        yaml.safe_dump({"failures": [{"snapshot": "d3", "incident": INCIDENT}, {"snapshot": "d5"}]})
    )
    [finding] = discover_value_findings(load_history(history), list(PAYMENTS_FIELDS), INCIDENT)
    assert finding.control == {
        "type": "accepted_values",
        "field": "currency",
        "values": ["EUR", "GBP", "USD"],
    }
    assert finding.fact == (
        "currency holds 3 distinct values in the 2 normal snapshots learned from; d3 has 3 rows "
        "with values never seen before: 'XXX' (2), 'eur' (1)"
    )


def test_an_incident_leaving_the_normal_range_gives_readable_bounds(tmp_path: Path) -> None:
    history = write_history(
        tmp_path / "payments",
        {"d1": NORMAL_DAY, "d2": [("EUR", -500), ("GBP", 40)], "d3": NORMAL_DAY},
        failed=["d2"],
    )
    [finding] = discover_value_findings(load_history(history), list(PAYMENTS_FIELDS), INCIDENT)
    # every normal value is >= 0 -> min 0; the normal max 9_512_000 rounds up to 9_600_000
    assert finding.control == {
        "type": "value_range",
        "field": "amount_minor",
        "min": 0,
        "max": 9_600_000,
    }
    assert finding.fact == (
        "amount_minor ranges from 0 to 9512000 in the 2 normal snapshots learned from; d2 holds "
        "values from -500 to 40"
    )


def test_the_bounds_are_learned_from_the_earlier_normal_snapshots_only(tmp_path: Path) -> None:
    history = write_history(
        tmp_path / "payments",
        {
            "d1": NORMAL_DAY,
            "d2": NORMAL_DAY,
            "d3": [("EUR", -500)],
            "d4": NORMAL_DAY,
            "d5": [("EUR", 12_000_000)],  # later and larger: held out, it widens nothing
        },
        failed=["d3"],
    )
    [finding] = discover_value_findings(load_history(history), list(PAYMENTS_FIELDS), INCIDENT)
    assert finding.control == {
        "type": "value_range",
        "field": "amount_minor",
        "min": 0,
        "max": 9_600_000,
    }
    learned = finding.learned_from
    assert (learned.normal, learned.failures, learned.held_out) == (
        ["d1", "d2", "d4"],
        ["d3"],
        ["d5"],
    )


def test_a_high_cardinality_field_or_a_failure_within_bounds_gives_no_finding(
    tmp_path: Path,
) -> None:
    many = [(f"C{i:02d}", 100) for i in range(51)]
    history = write_history(
        tmp_path / "payments",
        {"d1": many, "d2": [("NEW", 9_590_000)], "d3": NORMAL_DAY},
        failed=["d2"],
    )
    # 52 distinct normal currencies: no accepted set; 9_590_000 is within the readable max
    assert discover_value_findings(load_history(history), list(PAYMENTS_FIELDS), INCIDENT) == []


@pytest.mark.usefixtures("kind_installed")
def test_the_draft_follows_the_words_between_two_findings(tmp_path: Path) -> None:
    history = load_history(
        write_history(
            tmp_path / "payments",
            {"d1": NORMAL_DAY, "d2": [("XXX", -500)], "d3": NORMAL_DAY},
            failed=["d2"],
        )
    )
    source = dataset("payments", ("currency", "string"), ("amount_minor", "number"))
    facts = IncidentFacts(source=source, history=history, catalog=InMemoryCatalog([source]))

    def drafted(title: str) -> dict[str, Any] | None:
        text = IncidentText(urn=INCIDENT, title=title)
        draft = DeterministicProposer().draft(text, facts)
        assert draft.failure_pattern == INVALID_VALUES
        return draft.control

    assert drafted("Unexpected values in payments")["type"] == "accepted_values"
    assert drafted("Negative amounts in payments")["type"] == "value_range"


# --- the embedded loop ---------------------------------------------------------------------------
CURRENCY_INCIDENT = "urn:li:incident:reflex-test-unknown-currency"
PAYMENTS = dataset_urn("finance.payments")
FX_RATES = dataset_urn("finance.fx_rates")
CURRENCY_NOTE = "The gateway now rejects unknown currency codes; the XXX rows were reloaded."
#: dataset -> snapshot id -> currencies of its rows; payments' 2026-09-14 is the incident's
CURRENCY_HISTORIES = {
    "finance.payments": {
        "2026-09-13": ["EUR", "GBP", "USD", None],
        "2026-09-14": ["EUR", "XXX", "XXX"],
        "2026-09-15": ["USD", "EUR"],
    },
    "finance.fx_rates": {"2026-09-13": ["EUR", "GBP", "USD"], "2026-09-14": ["GBP", "USD"]},
}


def write_currencies(path: Path, dataset: str, currencies: list[str | None]) -> Path:
    """A snapshot of ``dataset`` with its estate schema: these currencies, NULL elsewhere."""
    return write_estate_snapshot(path, dataset, {"currency": currencies})


def currency_incident() -> MetadataChangeProposalWrapper:
    return active_incident(
        CURRENCY_INCIDENT,
        PAYMENTS,
        "Unknown currency codes in finance.payments",
        "On 2026-09-14 the gateway sent payments in currency XXX, which the ledger could not post.",
    )


def resolved_currency_incident(workdir: Path) -> Demo:
    workdir.mkdir()
    for name, snapshots in CURRENCY_HISTORIES.items():
        folder = workdir / "snapshots" / name
        for snapshot_id, currencies in snapshots.items():
            write_currencies(folder / f"{snapshot_id}.parquet", name, currencies)
    labels = {"failures": [{"snapshot": "2026-09-14", "incident": CURRENCY_INCIDENT}]}
    (workdir / "snapshots" / "finance.payments" / "labels.yaml").write_text(yaml.safe_dump(labels))
    return demo_with_resolved(workdir, currency_incident(), CURRENCY_NOTE)


def landed_currencies(demo: Demo, dataset: str, currencies: list[str | None]) -> None:
    name = dataset.split(",")[1]
    folder = demo.workdir / "snapshots" / LANDING_FOLDER / name
    path = write_currencies(folder / f"{LANDING_DAY.isoformat()}.parquet", name, currencies)
    land(demo, dataset, path, LANDING_DAY.isoformat())
    demo.react()


@pytest.mark.usefixtures("kind_installed")
def test_an_unknown_currency_closes_the_loop(tmp_path: Path) -> None:
    demo = resolved_currency_incident(tmp_path / "demo")
    store = store_of(demo.workdir)
    try:
        lesson = demo.lesson(CURRENCY_INCIDENT)
        assert (lesson.failure_pattern, lesson.proposer.name) == (INVALID_VALUES, "deterministic")
        assert lesson.control == {
            "type": "accepted_values",
            "field": "currency",
            "values": ["EUR", "GBP", "USD"],
        }
        quoted = {(e.source, e.quote) for e in lesson.evidence}
        assert ("title", "Unknown currency codes in finance.payments") in quoted
        assert ("resolution_note", CURRENCY_NOTE) in quoted
        assert (
            "history",
            "currency holds 3 distinct values in the 2 normal snapshots learned from; 2026-09-14 "
            "has 2 rows with values never seen before: 'XXX' (2)",
        ) in quoted
        # two normal snapshots: both learned from, none held out, and the lesson says so
        assert lesson.learned_from is not None
        assert (lesson.learned_from.learned, lesson.learned_from.held_out) == (
            ["2026-09-13", "2026-09-14", "2026-09-15"],
            [],
        )
        assert lesson.learned_from.note is not None

        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        lesson = demo.lesson(CURRENCY_INCIDENT)
        assert lesson.state is LessonState.PENDING_APPROVAL
        rows = {
            match[1]: (match[2], match[3], match[4])
            for match in re.finditer(
                r"^\| ([\w.]+) \| (\d\.\d\d) \| (yes|no) \| (.+) \|$", lesson.report, re.M
            )
        }
        # no key signal: whether currency is a key says nothing about the values it may hold
        assert rows == {
            "finance.fx_rates": (
                "0.60",
                "yes",
                "shares domain finance; has currency (VARCHAR) like the source; "
                "same platform snowflake; not yet covered",
            )
        }
        assert "- finance.ledger_entries: missing field currency" in lesson.report
        assert (
            "**Recommended scope** (2 datasets): precision 100%, recall 100%, 1 labelled "
            "failure caught, 0 false alarms, 0 missed, 0 snapshots not evaluable."
        ) in lesson.report

        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = demo.lesson(CURRENCY_INCIDENT)
        assert lesson.state is LessonState.PUBLISHED
        assert set(lesson.published_scope) == {PAYMENTS, FX_RATES}

        landed_currencies(demo, PAYMENTS, ["EUR", None, "GBP"])  # a normal load passes
        landed_currencies(demo, FX_RATES, ["EUR", "XXX", "XXX", "CHF", None])  # elsewhere
        assert incidents_b(store, PAYMENTS) == {}
        [(incident, info)] = incidents_b(store, FX_RATES).items()
        assert info.source is not None
        assert info.source.sourceUrn == assertion_urn(lesson.urn, FX_RATES)
        assert f"learned from incident {CURRENCY_INCIDENT}" in (info.description or "")
        assert "3 violation(s) in 5 row(s)" in (info.description or "")
        [recurrence] = stored_lesson(store, lesson.urn).recurrences
        assert (recurrence.incident, recurrence.dataset) == (incident, FX_RATES)
        assert recurrence.snapshot == LANDING_DAY.isoformat()
    finally:
        demo.catalog.close()
