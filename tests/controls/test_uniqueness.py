"""Semantics specific to the uniqueness control."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.executor import run_control
from reflex_actions.sql import shown_relation, shown_sql
from tests.conformance.dialect_rendering import RecordingEngine
from tests.conftest import write_snapshot

ROWS = [
    {"order_id": 1, "line_no": 1},
    {"order_id": 1, "line_no": 2},
    {"order_id": 2, "line_no": 1},
    {"order_id": 2, "line_no": 1},
    {"order_id": 3, "line_no": None},
    {"order_id": 3, "line_no": None},
]


def test_composite_key_counts_rows_beyond_the_first(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "lines.parquet", ROWS)
    result = run_control(UniquenessControl(fields=["order_id", "line_no"]), path)
    # (2, 1) twice -> one extra row; (3, NULL) is not a key and never a duplicate
    assert result.violation_count == 1
    assert result.sample == [{"key": {"order_id": 2, "line_no": 1}, "occurrences": 2}]
    # order_id alone is duplicated three times over
    assert run_control(UniquenessControl(field="order_id"), path).violation_count == 3


def test_max_duplicate_count_is_a_tolerance(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "lines.parquet", ROWS)
    assert not run_control(UniquenessControl(field="order_id", max_duplicate_count=2), path).passed
    tolerant = run_control(UniquenessControl(field="order_id", max_duplicate_count=3), path)
    assert tolerant.passed and tolerant.violation_count == 3


def test_sample_lists_worst_keys_first_and_is_capped(tmp_path: Path) -> None:
    rows = [{"k": f"key{n}"} for n in range(1, 9) for _ in range(n)]  # key n appears n times
    path = write_snapshot(tmp_path / "s.parquet", rows)
    result = run_control(UniquenessControl(field="k"), path, sample_size=3)
    assert [item["key"]["k"] for item in result.sample] == ["key8", "key7", "key6"]
    assert result.violation_count == sum(n - 1 for n in range(1, 9))


def test_empty_snapshot_passes_with_zero_rows(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "empty.parquet", [], columns=["k"])
    result = run_control(UniquenessControl(field="k"), path)
    assert (result.passed, result.rows_scanned, result.violation_count) == (True, 0, 0)


@pytest.mark.parametrize("fields", [["k"], ["k", "part"]])
def test_on_parquet_a_check_scans_once_and_agrees_with_the_two_step_check(
    tmp_path: Path, fields: list[str]
) -> None:
    """The footer's count, then one query whose plan reads the file once: its groups give the
    violation count (all of them, beyond the sample) and the sample, NULL keys never counted;
    a CSV (counted by reading it) gives the same answer through the counts then the sample."""
    rows = [{"k": None if i % 5 == 0 else f"k{i % 7}", "part": 1} for i in range(40)]
    parquet = write_snapshot(tmp_path / "s.parquet", rows)
    csv = write_snapshot(tmp_path / "s.csv", rows)
    control = UniquenessControl(fields=fields)
    engine = RecordingEngine()
    once = run_control(control, parquet, engine=engine, sample_size=2)
    twice = run_control(control, csv, sample_size=2)

    assert (once.violation_count, once.rows_scanned, once.passed) == (25, 40, False)
    assert (twice.violation_count, twice.rows_scanned) == (25, 40)
    assert [r["occurrences"] for r in once.sample] == [r["occurrences"] for r in twice.sample]
    assert [r["key"]["k"] for r in once.sample] == [r["key"]["k"] for r in twice.sample]
    counts, sample = engine.fetched
    assert "GROUP BY" not in counts and "DISTINCT" not in counts and "LIMIT" in sample
    plan = "\n".join(
        row[1]
        for row in engine.connection.execute(
            f"EXPLAIN {sample}", {"snapshot": str(parquet)}
        ).fetchall()
    )
    assert plan.count("READ_PARQUET") == 1, plan


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_keys_that_each_hold_a_null_are_no_keys_and_never_duplicates(
    tmp_path: Path, suffix: str
) -> None:
    """Every row's composite key holds a NULL in one part or the other: no key, no duplicate,
    on the one-scan path (Parquet) and the two-step one (CSV) alike."""
    rows = [{"a": None, "b": "x"}] * 3 + [{"a": "y", "b": None}] * 3 + [{"a": None, "b": None}] * 2
    path = write_snapshot(tmp_path / f"s.{suffix}", rows)
    result = run_control(UniquenessControl(fields=["a", "b"]), path)
    assert (result.passed, result.violation_count, result.rows_scanned, result.sample) == (
        True, 0, 8, [],
    )  # fmt: skip


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize("fields", [["k"], ["k", "part"]])
def test_the_sample_holds_only_duplicated_keys_most_first_then_by_key(
    tmp_path: Path, suffix: str, fields: list[str]
) -> None:
    """A key seen once is no duplicate, however large the sample; equal counts go in key order."""
    counts = {"b": 2, "a": 2, "c": 3, "d": 1, "e": 1}
    rows = [{"k": key, "part": 1} for key, n in counts.items() for _ in range(n)]
    path = write_snapshot(tmp_path / f"s.{suffix}", rows)
    result = run_control(UniquenessControl(fields=fields), path, sample_size=10)
    assert [(item["key"]["k"], item["occurrences"]) for item in result.sample] == [
        ("c", 3), ("a", 2), ("b", 2),
    ]  # fmt: skip
    assert (result.violation_count, result.rows_scanned, result.passed) == (4, 9, False)


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize("fields", [["k"], ["k", "part"]])
def test_a_snapshot_without_duplicates_counts_none(
    tmp_path: Path, suffix: str, fields: list[str]
) -> None:
    path = write_snapshot(tmp_path / f"s.{suffix}", [{"k": f"k{i}", "part": 1} for i in range(5)])
    result = run_control(UniquenessControl(fields=fields), path)
    assert (result.passed, result.violation_count, result.rows_scanned, result.sample) == (
        True, 0, 5, [],
    )  # fmt: skip


def test_with_no_sample_asked_the_counts_alone_judge_a_parquet_snapshot(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "lines.parquet", ROWS)
    engine = RecordingEngine()
    result = run_control(UniquenessControl(field="order_id"), path, engine=engine, sample_size=0)
    assert (result.violation_count, result.rows_scanned, result.sample) == (3, 6, [])
    assert "DISTINCT" in engine.fetched[0]


def test_the_key_is_named_on_the_dataset_and_described_with_its_tolerance() -> None:
    control = UniquenessControl(fields=["order_id", "line_no"], max_duplicate_count=2)
    assert control.required_columns() == ["order_id", "line_no"]
    renamed = control.with_dataset_fields({"order_id": "id"})
    assert (renamed.key_fields, renamed.max_duplicate_count) == (["id", "line_no"], 2)
    assert renamed.allowed_violations(rows_scanned=1_000) == 2
    assert (
        control.describe()
        == "(order_id, line_no) identifies at most one row, 2 duplicate(s) allowed"
    )
    single = UniquenessControl(field="order_id").with_dataset_fields({"order_id": "id"})
    assert (single.field, single.describe()) == ("id", "(id) identifies at most one row")


def test_the_check_shown_on_a_page_samples_the_five_worst_keys() -> None:
    shown = shown_sql(UniquenessControl(field="k").compile(shown_relation()))
    assert shown.rstrip().endswith("LIMIT 5")


@pytest.mark.parametrize(
    ("suffix", "fields", "sample_size", "counted_by"),
    [
        ("csv", ["k"], 5, {"DISTINCT"}),  # a single key: count(key) - count(DISTINCT key)
        ("csv", ["k", "part"], 5, {"GROUP BY"}),  # a composite one: the groups beyond the first
        ("parquet", ["k"], 1, set()),  # the footer counts the rows; one scan finds the rest
    ],
)
def test_each_relation_is_counted_by_its_cheapest_query(
    tmp_path: Path, suffix: str, fields: list[str], sample_size: int, counted_by: set[str]
) -> None:
    path = write_snapshot(tmp_path / f"s.{suffix}", [{"k": "a", "part": 1}] * 2)
    engine = RecordingEngine()
    control = UniquenessControl(fields=fields)
    result = run_control(control, path, engine=engine, sample_size=sample_size)
    assert (result.violation_count, len(result.sample)) == (1, 1)
    counts, sample = engine.fetched
    assert {word for word in ("DISTINCT", "GROUP BY") if word in counts} == counted_by
    # one scan keeps the duplicated groups once, for the sample and their total alike
    assert ("reflex_duplicated AS MATERIALIZED" in sample) == (suffix == "parquet")
