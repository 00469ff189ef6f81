"""The schema-change kind: ``schema_contract`` passes the kind conformance suite, counts broken
columns exactly by type family on hand-built Parquet and CSV snapshots, is drafted from the
snapshot whose columns differ, and finds similar assets through the source's lineage."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from reflex_actions.backtest import load_history
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.controls import parse_control_spec
from reflex_actions.executor import run_control
from reflex_actions.kinds.schema_change import SCHEMA_CHANGE
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText
from reflex_actions.registry import registered_kinds
from reflex_actions.similarity import SimilarityQuery, resolve_similar_assets
from reflex_actions.sql import shown_relation, shown_sql
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from tests.conformance.control_cases import HOSTILE_NAMES, ControlCase
from tests.conftest import write_snapshot

SALES = "urn:li:domain:sales"


def test_the_kind_is_built_in() -> None:
    """Registered through the package's own metadata, like every built-in kind."""
    assert "schema_change" in {kind.pattern for kind in registered_kinds()}


def contract(columns: dict[str, str], allow_new_columns: bool = True) -> Any:
    return parse_control_spec(
        {"type": "schema_contract", "columns": columns, "allow_new_columns": allow_new_columns}
    )


SCHEMA_CONTRACT = ControlCase(
    type_name="schema_contract",
    columns={"id": "order_id", "amount": "amount", "extra": "note"},
    # text columns, so a CSV (read as text) and a Parquet snapshot of the same rows agree
    make_spec=lambda c: {
        "type": "schema_contract",
        "columns": {c["id"]: "VARCHAR", c["amount"]: "varchar(64)"},
        "allow_new_columns": False,
    },
    passing_rows=[{"id": "o1", "amount": "10"}, {"id": "o2", "amount": None}],
    # amount is missing and note is not in the contract
    failing_rows=[{"id": "o1", "extra": "x"}, {"id": "o2", "extra": None}, {"id": None}],
    expected_violations=2,
    expected_first_sample={"expected": "VARCHAR(64)", "found": None},
    invalid_specs=[
        ({"type": "schema_contract"}, "columns"),
        ({"type": "schema_contract", "columns": {}}, "columns"),
        ({"type": "schema_contract", "columns": {"": "VARCHAR"}}, "empty"),
        ({"type": "schema_contract", "columns": {"a": "INT; DROP TABLE t"}}, "not a type name"),
        ({"type": "schema_contract", "columns": {"a": "X" * 65}}, "not a type name"),
        ({"type": "schema_contract", "columns": {"a": 1}}, "columns.a"),
        (
            {"type": "schema_contract", "columns": {f"c{i}": "INT" for i in range(65)}},
            "columns",
        ),
        (
            {"type": "schema_contract", "columns": {"a": "INT"}, "allow_new_columns": "no"},
            "allow_new_columns",
        ),
    ],
)


def dataset(name: str, *fields: tuple[str, str], upstreams: tuple[str, ...] = ()) -> DatasetContext:
    return DatasetContext(
        urn=urn(name),
        name=name,
        platform="postgres",
        domain=SALES,
        fields=tuple(FieldInfo(name=f, native_type=t.upper(), type=t) for f, t in fields),
        upstreams=upstreams,
    )


def urn(name: str) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:postgres,{name},PROD)"


ORDERS = urn("shop.orders")


def estate() -> list[DatasetContext]:
    """raw.orders -> shop.orders -> order_summary -> revenue; raw.orders -> shop.refunds
    (a sibling), raw.orders -> shop.audit (a sibling without amount); web.carts has amount but
    no lineage to the orders."""
    raw = urn("raw.orders")
    return [
        dataset("raw.orders", ("amount", "number")),
        dataset("shop.orders", ("order_id", "string"), ("amount", "number"), upstreams=(raw,)),
        dataset("shop.order_summary", ("amount", "number"), upstreams=(ORDERS,)),
        dataset("shop.revenue", ("amount", "number"), upstreams=(urn("shop.order_summary"),)),
        dataset("shop.refunds", ("amount", "number"), upstreams=(raw,)),
        dataset("shop.audit", ("order_id", "string"), upstreams=(raw,)),
        dataset("web.carts", ("amount", "number")),
    ]


class TestSchemaContractControl(BaseLessonKindConformance):
    kind_pattern = SCHEMA_CHANGE
    incident = IncidentText(
        urn="urn:li:incident:schema",
        title="Revenue dashboard broke after an upstream release",
        description="The loader renamed the column amount to amount_minor in shop.orders.",
    )
    control_case = SCHEMA_CONTRACT
    renaming: ClassVar[dict[str, str] | None] = {"order_id": "order_ref"}

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        control = contract({"amount": "BIGINT"})
        query = SimilarityQuery(pattern=SCHEMA_CHANGE, control=control, source_urn=ORDERS)
        return InMemoryCatalog(estate()), query


# --- exact counts on hand-built snapshots --------------------------------------------------------
def parquet(path: Path, **columns: pa.Array) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


ORDER_SCHEMA = {"order_id": "VARCHAR", "amount": "BIGINT", "paid_at": "TIMESTAMP"}


def typed_orders(path: Path, **overrides: pa.Array) -> Path:
    columns = {
        "order_id": pa.array(["o1", "o2", None], pa.string()),
        "amount": pa.array([10, None, 30], pa.int64()),
        "paid_at": pa.array([None, None, None], pa.timestamp("us")),
        **overrides,
    }
    return parquet(path, **{k: v for k, v in columns.items() if v is not None})


def test_a_snapshot_matching_the_contract_passes(tmp_path: Path) -> None:
    result = run_control(contract(ORDER_SCHEMA), typed_orders(tmp_path / "s.parquet"))
    assert (result.passed, result.violation_count, result.rows_scanned) == (True, 0, 3)


def test_a_missing_column_is_a_failed_check_not_drift(tmp_path: Path) -> None:
    path = typed_orders(tmp_path / "s.parquet", amount=None, amount_minor=pa.array([1, 2, 3]))
    result = run_control(contract(ORDER_SCHEMA), path)
    assert (result.passed, result.violation_count, result.rows_scanned) == (False, 1, 3)
    assert result.sample == [{"column": "amount", "expected": "BIGINT", "found": None}]


def test_a_retype_across_families_breaks_and_within_a_family_does_not(tmp_path: Path) -> None:
    path = typed_orders(
        tmp_path / "s.parquet",
        order_id=pa.array([1, 2, 3], pa.int32()),  # string -> integer: a break
        amount=pa.array([1, 2, 3], pa.int16()),  # BIGINT -> SMALLINT: the same family
        paid_at=pa.array([None] * 3, pa.timestamp("us", tz="UTC")),  # gains a zone: a break
    )
    result = run_control(contract(ORDER_SCHEMA), path)
    assert result.violation_count == 2
    assert result.sample == [
        {"column": "order_id", "expected": "VARCHAR", "found": "INTEGER"},
        {"column": "paid_at", "expected": "TIMESTAMP", "found": "TIMESTAMP WITH TIME ZONE"},
    ]


@pytest.mark.parametrize(
    ("expected", "arrow_type"),
    [
        ("VARCHAR(64)", pa.string()),
        ("TEXT", pa.large_string()),
        ("DECIMAL(10,2)", pa.decimal128(18, 4)),
        ("UBIGINT", pa.int8()),
        ("FLOAT", pa.float64()),
        ("BLOB", pa.binary()),
        ("BOOL", pa.bool_()),
    ],
)
def test_types_within_a_family_are_no_break(
    tmp_path: Path, expected: str, arrow_type: pa.DataType
) -> None:
    path = parquet(tmp_path / "s.parquet", value=pa.array([None], arrow_type))
    assert run_control(contract({"value": expected}), path).violation_count == 0


def test_new_columns_count_only_when_not_allowed(tmp_path: Path) -> None:
    path = typed_orders(tmp_path / "s.parquet", note=pa.array(["a", "b", "c"]), z=pa.array([1] * 3))
    assert run_control(contract(ORDER_SCHEMA), path).violation_count == 0
    strict = run_control(contract(ORDER_SCHEMA, allow_new_columns=False), path)
    assert strict.violation_count == 2
    assert strict.sample == [
        {"column": "note", "expected": None, "found": "VARCHAR"},
        {"column": "z", "expected": None, "found": "BIGINT"},
    ]


def test_hostile_column_names_are_bound_and_counted(tmp_path: Path) -> None:
    kept, dropped = HOSTILE_NAMES[0], HOSTILE_NAMES[2]
    control = contract({kept: "BIGINT", dropped: "VARCHAR"})
    shown = shown_sql(control.compile(shown_relation()))
    assert kept not in shown and dropped not in shown
    path = parquet(tmp_path / "s.parquet", **{kept: pa.array([1])})
    result = run_control(control, path)
    assert result.sample == [{"column": dropped, "expected": "VARCHAR", "found": None}]


def test_a_csv_snapshot_is_checked_for_its_column_names_only(
    tmp_path: Path,
) -> None:
    """A CSV is read as text, so only its column names are checked: a typed contract is not
    broken by the reader's text, a missing column still is."""
    path = write_snapshot(tmp_path / "s.csv", [{"order_id": "o1", "amount": "12"}])
    assert run_control(contract({"order_id": "VARCHAR", "amount": "TEXT"}), path).passed
    missing = run_control(contract({"order_id": "VARCHAR", "amount_minor": "VARCHAR"}), path)
    assert missing.sample == [{"column": "amount_minor", "expected": "VARCHAR", "found": None}]
    typed = run_control(contract({"order_id": "VARCHAR", "amount": "BIGINT"}), path)
    assert (typed.passed, typed.sample) == (True, [])
    parquet_path = write_snapshot(tmp_path / "s.parquet", [{"order_id": "o1", "amount": "12"}])
    on_parquet = run_control(contract({"order_id": "VARCHAR", "amount": "BIGINT"}), parquet_path)
    assert on_parquet.sample == [{"column": "amount", "expected": "BIGINT", "found": "VARCHAR"}]


# --- drafting from the history -------------------------------------------------------------------
INCIDENT = IncidentText(
    urn="urn:li:incident:schema",
    title="Revenue report broke",
    description="A column was renamed in shop.orders and the report no longer loads.",
)


def renamed_history(folder: Path) -> Path:
    folder.mkdir(parents=True)
    typed_orders(folder / "2026-03-01.parquet")
    typed_orders(folder / "2026-03-02.parquet", amount=pa.array([1, 2, 3], pa.int32()))
    typed_orders(folder / "2026-03-03.parquet", amount=None, amount_minor=pa.array([1, 2, 3]))
    labels = {"failures": [{"snapshot": "2026-03-03", "incident": INCIDENT.urn}]}
    (folder / "labels.yaml").write_text(yaml.safe_dump(labels))
    return folder


def test_the_draft_contracts_the_column_the_incident_snapshot_renamed(tmp_path: Path) -> None:
    catalog = InMemoryCatalog(estate())
    facts = IncidentFacts(
        source=catalog.dataset(ORDERS),
        history=load_history(renamed_history(tmp_path / "orders")),
        catalog=catalog,
    )
    draft = DeterministicProposer().draft(INCIDENT, facts)
    assert draft.failure_pattern == SCHEMA_CHANGE
    # typed as the latest normal snapshot has it (INTEGER there, BIGINT before: one family)
    assert draft.control == {"type": "schema_contract", "columns": {"amount": "INTEGER"}}
    assert (
        "history",
        "in all 2 normal snapshots vs 2026-03-03: amount (INTEGER) is missing there; "
        "new columns amount_minor",
    ) in {(e.source, e.quote) for e in draft.evidence}
    assert ("description", INCIDENT.description) in {(e.source, e.quote) for e in draft.evidence}


def test_without_a_differing_snapshot_the_draft_has_no_control(tmp_path: Path) -> None:
    folder = tmp_path / "orders"
    folder.mkdir()
    typed_orders(folder / "2026-03-01.parquet")
    catalog = InMemoryCatalog(estate())
    facts = IncidentFacts(
        source=catalog.dataset(ORDERS), history=load_history(folder), catalog=catalog
    )
    draft = DeterministicProposer().draft(INCIDENT, facts)
    assert (draft.failure_pattern, draft.control) == (SCHEMA_CHANGE, None)


# --- similar assets ------------------------------------------------------------------------------
def test_similar_assets_are_consumers_and_siblings_with_the_lineage_path() -> None:
    catalog = InMemoryCatalog(estate())
    query = SimilarityQuery(
        pattern=SCHEMA_CHANGE, control=contract({"amount": "BIGINT"}), source_urn=ORDERS
    )
    resolution = resolve_similar_assets(query, catalog)
    lineage = {
        c.name: next(s.reason for s in c.signals if s.name == "lineage")
        for c in resolution.candidates
        if any(s.name == "lineage" for s in c.signals)
    }
    assert lineage == {
        "shop.order_summary": "reads shop.orders (shop.orders -> shop.order_summary)",
        "shop.revenue": "reads shop.orders through shop.order_summary (shop.orders -> "
        "shop.order_summary -> shop.revenue)",
        "shop.refunds": "fed by raw.orders like shop.orders (raw.orders -> shop.refunds)",
    }
    ranked = [c.name for c in resolution.candidates]
    assert ranked.index("web.carts") > max(ranked.index(name) for name in lineage)
    excluded = {e.name: e.reason for e in resolution.excluded}
    assert excluded["shop.audit"] == "missing field amount: the contract would fail on it at once"
    assert excluded["raw.orders"] == (
        "upstream of the source (1 hop): a schema change at the source does not reach it"
    )
