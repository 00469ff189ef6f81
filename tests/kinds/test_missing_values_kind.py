"""The missing-values kind: its ``not_null`` control, its evidence from the history, and the
whole embedded loop from an incident about NULL account ids to incident B elsewhere."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from reflex_actions.backtest import load_history
from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.controls import parse_control_spec
from reflex_actions.demo.estate import DATASETS, dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER, arrow_schema
from reflex_actions.executor import run_control
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.kinds.missing_values import MISSING_VALUES
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText, LessonState
from reflex_actions.similarity import SimilarityQuery
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.testing.kind_suite import BaseLessonKindConformance
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.conformance.control_cases import ControlCase
from tests.conftest import write_snapshot
from tests.kinds.conftest import ENTRY_POINT as EMPTY_TABLE_ENTRY_POINT
from tests.loop.store import (
    active_incident,
    demo_with_resolved,
    incidents_b,
    land,
    store_of,
    stored_lesson,
)

FINANCE = "urn:li:domain:finance"


@pytest.fixture(autouse=True)
def empty_table_installed(install_kinds: Callable[..., None]) -> None:
    """The empty-table kind beside this built-in one, whose "missing rows" it must not steal."""
    install_kinds(EMPTY_TABLE_ENTRY_POINT)


NOT_NULL = ControlCase(
    type_name="not_null",
    columns={"id": "transaction_id", "account": "account_id", "amount": "amount"},
    make_spec=lambda c: {
        "type": "not_null",
        "fields": [c["account"], c["amount"]],
        "key": [c["id"]],
    },
    passing_rows=[{"id": f"t{i}", "account": f"a{i}", "amount": i} for i in range(5)],
    failing_rows=[
        {"id": "t1", "account": "a1", "amount": 1},
        {"id": "t2", "account": None, "amount": 2},
        {"id": "t3", "account": None, "amount": None},
        {"id": "t4", "account": "a4", "amount": None},
        {"id": "t5", "account": "a5", "amount": 5},
    ],
    expected_violations=3,
    # every sampled value is keyed by a column name, which the suite also makes hostile: the
    # samples are checked exactly in test_the_sample_shows_the_key_and_which_fields_are_null
    expected_first_sample={},
    invalid_specs=[
        ({"type": "not_null"}, "exactly one of 'field'"),
        ({"type": "not_null", "field": "a", "fields": ["b"]}, "exactly one of 'field'"),
        ({"type": "not_null", "fields": []}, "fields"),
        ({"type": "not_null", "fields": ["a", "a"]}, "fields lists the column 'a' twice"),
        ({"type": "not_null", "field": "a", "key": ["k", "k"]}, "key lists the column 'k' twice"),
        ({"type": "not_null", "field": ""}, "empty"),
        ({"type": "not_null", "field": "a", "max_null_fraction": True}, "max_null_fraction"),
        ({"type": "not_null", "field": "a", "max_null_fraction": "0.1"}, "max_null_fraction"),
        ({"type": "not_null", "field": "a", "max_null_fraction": 1.5}, "max_null_fraction"),
        ({"type": "not_null", "field": "a", "max_null_fraction": -0.1}, "max_null_fraction"),
        (
            {"type": "not_null", "field": "a", "max_null_fraction": float("nan")},
            "max_null_fraction",
        ),
    ],
    bound_values=["0.0"],
)


def dataset(name: str, *fields: FieldInfo) -> DatasetContext:
    return DatasetContext(
        urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
        name=name,
        platform="snowflake",
        domain=FINANCE,
        fields=fields,
    )


def text_field(name: str, is_key: bool = False) -> FieldInfo:
    return FieldInfo(name=name, native_type="VARCHAR", type="string", is_key=is_key)


class TestMissingValuesKind(BaseLessonKindConformance):
    kind_pattern = MISSING_VALUES
    incident = IncidentText(
        urn="urn:li:incident:nulls",
        title="Payments without an account",
        description="After the CRM sync, account_id was NULL for 40 payments of 2026-09-14.",
    )
    control_case = NOT_NULL
    renaming: ClassVar[dict[str, str] | None] = {"account_id": "acct", "transaction_id": "txn"}

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        key, account = text_field("transaction_id", is_key=True), text_field("account_id")
        source = dataset("payments", key, account, FieldInfo(name="amount", type="number"))
        catalog = InMemoryCatalog(
            [
                source,
                dataset("ledger", key, account, FieldInfo(name="amount", type="number")),
                dataset("balances", account, FieldInfo(name="amount", type="number")),
                dataset("fx", text_field("rate")),
            ]
        )
        query = SimilarityQuery(
            pattern=MISSING_VALUES, control=self.control(), source_urn=source.urn
        )
        return catalog, query


# --- the control on hand-built snapshots -----------------------------------------------------


ROWS = [
    {"id": "t1", "account": "a1"},
    {"id": "t2", "account": None},
    {"id": "t3", "account": ""},  # an empty string is a value in Parquet, NULL in CSV
    {"id": "t4", "account": "a4"},
    {"id": "t5", "account": None},
    {"id": "t6", "account": "a6"},
    {"id": "t7", "account": "a7"},
    {"id": "t8", "account": "a8"},
    {"id": "t9", "account": "a9"},
    {"id": "t10", "account": "a10"},
]


@pytest.mark.parametrize(
    ("snapshot_format", "null_rows"), [("parquet", 2), ("csv", 3)], ids=["parquet", "csv"]
)
@pytest.mark.parametrize(
    ("fraction", "allowance"), [(0.0, 0), (0.1, 1), (0.2, 2), (0.29, 2), (0.3, 3), (1.0, 10)]
)
def test_every_null_row_is_a_violation_and_the_fraction_an_allowance(
    tmp_path: Path, snapshot_format: str, null_rows: int, fraction: float, allowance: int
) -> None:
    path = write_snapshot(
        tmp_path / f"s.{snapshot_format}",
        [{"transaction_id": r["id"], "account_id": r["account"]} for r in ROWS],
    )
    control = parse_control_spec(
        {"type": "not_null", "field": "account_id", "max_null_fraction": fraction}
    )
    result = run_control(control, path)
    assert result.rows_scanned == 10
    assert (result.violation_count, result.allowed_violations) == (null_rows, allowance)
    assert result.passed is (null_rows <= allowance)
    # a failing check shows every NULL row as an example (a passing one reads no examples);
    # with no key, each is shown with the snapshot's other column
    examples = [
        {
            "row": {"transaction_id": row["id"]},
            "null_fields": ["account_id"],
            "null_counts": {"account_id": null_rows},
        }
        for row in sorted(ROWS, key=lambda row: row["id"])
        if row["account"] is None or (snapshot_format == "csv" and row["account"] == "")
    ]
    assert result.sample == ([] if result.passed else examples)


def test_the_sample_shows_the_key_and_which_fields_are_null(tmp_path: Path) -> None:
    rows = [
        {"transaction_id": "t9", "account_id": None, "currency": "EUR"},
        {"transaction_id": "t1", "account_id": None, "currency": None},
        {"transaction_id": "t5", "account_id": "a5", "currency": None},
        {"transaction_id": "t3", "account_id": "a3", "currency": "EUR"},
    ]
    control = parse_control_spec(
        {"type": "not_null", "fields": ["account_id", "currency"], "key": ["transaction_id"]}
    )
    result = run_control(control, write_snapshot(tmp_path / "s.parquet", rows), sample_size=2)
    assert (result.passed, result.violation_count, result.rows_scanned) == (False, 3, 4)
    assert result.sample == [
        {
            "key": {"transaction_id": "t1"},
            "null_fields": ["account_id", "currency"],
            "null_counts": {"account_id": 2, "currency": 2},
        },
        {
            "key": {"transaction_id": "t5"},
            "null_fields": ["currency"],
            "null_counts": {"account_id": 2, "currency": 2},
        },
    ]
    assert control.describe() == "(account_id, currency) is never NULL"


#: Parcels whose id arrived NULL: the id is the declared key, so it names no sampled row.
PARCELS = [
    {
        "parcel_id": None if n % 2 else f"p{n}",
        "weight_kg": 1.5 + n,  # a float: a measure, not what tells one row from another
        "fragile": n % 3 == 0,  # a boolean: the same in half the rows
        "shipment_id": f"s{9 - n}",
        "line": n,
        "label": f"L{n}",
        "depot": "north",  # a fourth identifying column: a sampled row shows three at most
    }
    for n in range(8)
]


@pytest.mark.parametrize("key", [None, ["parcel_id"]], ids=["no key", "the field itself"])
def test_a_sample_keyed_by_its_null_field_alone_shows_which_rows_by_other_columns(
    tmp_path: Path, key: list[str] | None
) -> None:
    """Each sampled row held {"key": {"parcel_id": null}}: five rows that said nothing of which
    rows they were. They are shown with the first few columns that identify a row instead."""
    spec: dict[str, Any] = {"type": "not_null", "field": "parcel_id"}
    if key is not None:
        spec["key"] = key
    result = run_control(parse_control_spec(spec), write_snapshot(tmp_path / "s.parquet", PARCELS))
    assert (result.passed, result.violation_count) == (False, 4)
    null_row = {"null_fields": ["parcel_id"], "null_counts": {"parcel_id": 4}}
    # sorted by the columns shown: shipment_id first (s2, s4, s6, s8 are the NULL ids' rows)
    assert result.sample == [
        {"row": {"shipment_id": f"s{9 - n}", "line": n, "label": f"L{n}"}, **null_row}
        for n in (7, 5, 3, 1)
    ]


def test_a_key_holding_the_null_field_is_shown_by_its_other_columns(tmp_path: Path) -> None:
    control = parse_control_spec(
        {"type": "not_null", "field": "parcel_id", "key": ["parcel_id", "line"]}
    )
    result = run_control(control, write_snapshot(tmp_path / "s.parquet", PARCELS), sample_size=2)
    assert [row["key"] for row in result.sample] == [{"line": 1}, {"line": 3}]


def test_renaming_moves_the_checked_fields_and_the_sample_key() -> None:
    control = parse_control_spec(
        {"type": "not_null", "field": "account_id", "key": ["transaction_id"]}
    )
    renamed = control.with_dataset_fields({"account_id": "acct", "transaction_id": "txn_id"})
    assert renamed == parse_control_spec({"type": "not_null", "field": "acct", "key": ["txn_id"]})


# --- drafting from the history ---------------------------------------------------------------

PAYMENTS = dataset(
    "payments",
    text_field("transaction_id", is_key=True),
    text_field("account_id"),
    text_field("memo"),
)


def history_of(
    folder: Path, snapshots: dict[str, list[dict[str, Any]]], failures: list[str]
) -> History:
    for snapshot_id, rows in snapshots.items():
        suffix = "csv" if snapshot_id.endswith("3") else "parquet"
        write_snapshot(folder / f"{snapshot_id}.{suffix}", rows)
    (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": failures}))
    return load_history(folder)


def payment(i: int, account: str | None, memo: str | None = None) -> dict[str, Any]:
    return {"transaction_id": f"t{i}", "account_id": account, "memo": memo}


def test_the_history_names_the_field_that_went_null(tmp_path: Path) -> None:
    """memo is NULL everywhere (nullable by design); account_id only in the labelled day."""
    history = history_of(
        tmp_path,
        {
            "2026-09-12": [payment(1, "a1"), payment(2, "a2")],
            "2026-09-13": [payment(3, "a3"), payment(4, "a4", "gift")],  # CSV
            "2026-09-14": [payment(5, None), payment(6, None), payment(7, "a7")],
        },
        ["2026-09-14"],
    )
    text = IncidentText(
        urn="urn:li:incident:n", title="Blank accounts", description="Some payments were blank."
    )
    facts = IncidentFacts(source=PAYMENTS, history=history, catalog=InMemoryCatalog([PAYMENTS]))
    draft = DeterministicProposer().draft(text, facts)
    assert draft.failure_pattern == MISSING_VALUES
    assert draft.control == {"type": "not_null", "field": "account_id", "key": ["transaction_id"]}
    assert (
        "history",
        "account_id has no NULL in all 2 normal snapshots and 2 NULL rows in 2026-09-14",
    ) in {(e.source, e.quote) for e in draft.evidence}
    assert draft.confidence == 0.9


def test_without_a_history_a_named_key_field_or_no_control(tmp_path: Path) -> None:
    facts = IncidentFacts(source=PAYMENTS, history=None, catalog=InMemoryCatalog([PAYMENTS]))
    named = IncidentText(
        urn="urn:li:incident:k", title="NULL keys", description="transaction_id came in null."
    )
    draft = DeterministicProposer().draft(named, facts)
    assert draft.control == {"type": "not_null", "field": "transaction_id"}
    unnamed = IncidentText(urn="urn:li:incident:u", title="Null values in payments")
    draft = DeterministicProposer().draft(unnamed, facts)
    assert (draft.failure_pattern, draft.control) == (MISSING_VALUES, None)
    assert "steward must name" in draft.rationale


def test_missing_rows_are_a_volume_incident_not_missing_values() -> None:
    facts = IncidentFacts(source=None, history=None, catalog=InMemoryCatalog([]))
    text = IncidentText(
        urn="urn:li:incident:v",
        title="Missing rows in payments",
        description="The table was empty: no rows landed on 2026-09-14.",
    )
    draft = DeterministicProposer().draft(text, facts)
    # two volume kinds' words fit and no history settles which: never missing values
    assert draft.failure_pattern == "unknown"
    assert "empty_table" in draft.rationale and "missing_rows" in draft.rationale
    assert "missing_values" not in draft.rationale


# --- the whole loop --------------------------------------------------------------------------

NULL_INCIDENT = "urn:li:incident:reflex-test-null-accounts"
PAYMENTS_URN = dataset_urn("finance.payments")
LEDGER = dataset_urn("finance.ledger_entries")
GL_BALANCES = dataset_urn("finance.gl_balances")
NOTE = "The CRM sync now fails the load when an account is unknown; 2026-09-14 was reloaded."
#: dataset -> snapshot id -> rows with a NULL account_id (of 3), and the labelled failures
HISTORIES = {
    "finance.payments": ({"2026-09-13": 0, "2026-09-14": 2, "2026-09-15": 0}, ["2026-09-14"]),
    "finance.ledger_entries": (
        {"2026-09-13": 0, "2026-09-14": 1, "2026-09-15": 0},
        ["2026-09-14"],
    ),
    "finance.gl_balances": (
        {"2026-09-13": 0, "2026-09-14": 3, "2026-09-15": 0, "2026-09-16": 1},
        ["2026-09-14"],
    ),
}


def write_table(path: Path, name: str, null_accounts: int, rows: int = 3) -> Path:
    """A snapshot of estate dataset ``name``: text columns filled, others NULL, and the first
    ``null_accounts`` rows without an account_id."""
    schema = arrow_schema(DATASETS[name])
    columns = []
    for field in schema:
        if field.name == "account_id":
            values = [None if i < null_accounts else f"acct-{i}" for i in range(rows)]
            columns.append(pa.array(values, field.type))
        elif pa.types.is_string(field.type):
            columns.append(pa.array([f"{field.name}-{i}" for i in range(rows)], field.type))
        else:
            columns.append(pa.nulls(rows, field.type))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), path)
    return path


def null_accounts_incident() -> MetadataChangeProposalWrapper:
    return active_incident(
        NULL_INCIDENT,
        PAYMENTS_URN,
        "Payments without an account",
        "Reconciliation broke on 2026-09-14: finance.payments had NULL "
        "account ids after the CRM sync dropped unknown accounts.",
    )


def test_missing_values_close_the_loop(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    for name, (snapshots, failures) in HISTORIES.items():
        for snapshot_id, nulls in snapshots.items():
            write_table(workdir / "snapshots" / name / f"{snapshot_id}.parquet", name, nulls)
        labels = {"failures": [{"snapshot": f, "incident": NULL_INCIDENT} for f in failures]}
        (workdir / "snapshots" / name / "labels.yaml").write_text(yaml.safe_dump(labels))
    demo = demo_with_resolved(workdir, null_accounts_incident(), NOTE)
    store = store_of(workdir)
    try:
        lesson = demo.lesson(NULL_INCIDENT)
        assert (lesson.failure_pattern, lesson.proposer.name) == (MISSING_VALUES, "deterministic")
        assert lesson.control == {
            "type": "not_null",
            "field": "account_id",
            "key": ["transaction_id"],
        }
        quoted = {(e.source, e.quote) for e in lesson.evidence}
        assert (
            "history",
            "account_id has no NULL in all 2 normal snapshots and 2 NULL rows in 2026-09-14",
        ) in quoted
        assert any(source == "description" and "NULL" in quote for source, quote in quoted)

        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        lesson = demo.lesson(NULL_INCIDENT)
        assert lesson.state is LessonState.PENDING_APPROVAL
        rows = {
            match[1]: (match[3], match[4])
            for match in re.finditer(
                r"^\| ([\w.]+) \| (\d\.\d\d) \| (yes|no) \| (.+) \|$", lesson.report, re.M
            )
        }
        assert rows["finance.ledger_entries"][0] == "yes"
        assert "has account_id" in rows["finance.ledger_entries"][1]
        assert "repeated values" not in lesson.report  # no uniqueness wording for NULLs
        excluded = lesson.report.split("finance.gl_balances", 1)[1].splitlines()[0]
        assert "transaction_id, the key that identifies sampled rows" in excluded

        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = demo.lesson(NULL_INCIDENT)
        assert lesson.state is LessonState.PUBLISHED
        assert LEDGER in lesson.published_scope

        landing = workdir / "snapshots" / LANDING_FOLDER / "finance.ledger_entries"
        good = write_table(landing / "good.parquet", "finance.ledger_entries", 0)
        land(demo, LEDGER, good, "2026-10-01-good")
        demo.react()
        assert incidents_b(store, LEDGER) == {}
        bad = write_table(
            landing / f"{LANDING_DAY.isoformat()}.parquet", "finance.ledger_entries", 2
        )
        land(demo, LEDGER, bad, LANDING_DAY.isoformat())
        demo.react()
        [(incident, info)] = incidents_b(store, LEDGER).items()
        assert info.source is not None
        assert info.source.sourceUrn == assertion_urn(lesson.urn, LEDGER)
        assert "2 violation(s) in 3 row(s)" in (info.description or "")
        assert '"null_fields": ["account_id"]' in (info.description or "")
        [recurrence] = stored_lesson(store, lesson.urn).recurrences
        assert (recurrence.incident, recurrence.dataset) == (incident, LEDGER)
    finally:
        demo.catalog.close()
