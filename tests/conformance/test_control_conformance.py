"""The conformance suite every registered control type passes (parse, compile, run, errors)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from reflex_actions.controls import (
    CONTROL_TYPES,
    dump_control_yaml,
    parse_control_spec,
    parse_control_yaml,
)
from reflex_actions.errors import (
    ControlSpecError,
    SchemaDriftError,
    SnapshotNotFoundError,
    SnapshotUnreadableError,
)
from reflex_actions.executor import run_control
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.sql import Relation
from tests.conformance.control_cases import CASES, HOSTILE_NAMES, ControlCase
from tests.conftest import write_snapshot

cases = pytest.mark.parametrize("case", CASES, ids=lambda case: case.type_name)


def rows_as(case: ControlCase, roles: list[dict], names: dict[str, str]) -> list[dict]:
    return [{names[role]: value for role, value in row.items()} for row in roles]


def hostile_names(case: ControlCase) -> dict[str, str]:
    return {
        role: HOSTILE_NAMES[i % len(HOSTILE_NAMES)] + f"#{i}" for i, role in enumerate(case.columns)
    }


def test_every_registered_control_type_has_a_conformance_case() -> None:
    assert sorted(CONTROL_TYPES) == sorted(case.type_name for case in CASES)


@cases
def test_parses_valid_spec_and_round_trips_yaml(case: ControlCase) -> None:
    control = parse_control_spec(case.make_spec(case.columns))
    assert isinstance(control, CONTROL_TYPES[case.type_name])
    assert parse_control_yaml(dump_control_yaml(control)) == control


@cases
def test_rejects_unknown_key_naming_it(case: ControlCase) -> None:
    spec = {**case.make_spec(case.columns), "severity": "high"}
    with pytest.raises(ControlSpecError, match="unknown key 'severity'"):
        parse_control_spec(spec)


@cases
def test_rejects_invalid_values(case: ControlCase) -> None:
    for spec, fragment in case.invalid_specs:
        with pytest.raises(ControlSpecError) as raised:
            parse_control_spec(spec)
        assert fragment in str(raised.value), (spec, str(raised.value))


def test_rejects_unknown_type_naming_it_and_the_known_ones() -> None:
    with pytest.raises(ControlSpecError) as raised:
        parse_control_yaml("type: freshness\nmax_age: 1d\n")
    message = str(raised.value)
    assert "'freshness'" in message
    assert all(name in message for name in CONTROL_TYPES)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- type: uniqueness", "must be a mapping"),
        ("field: x", "has no 'type'"),
        ("type: uniqueness\nfield: a\nfield: b\n", "duplicate key 'field'"),
        ("type: [uniqueness", "not valid YAML"),
        ("type: 3", "unknown control type 3"),
    ],
)
def test_rejects_malformed_yaml(text: str, fragment: str) -> None:
    with pytest.raises(ControlSpecError, match=fragment.replace("[", r"\[")):
        parse_control_yaml(text)


@cases
def test_compiles_deterministically_with_quoted_identifiers_and_bound_values(
    case: ControlCase,
) -> None:
    names = hostile_names(case)
    control = parse_control_spec(case.make_spec(names))
    relation = Relation(sql="SELECT * FROM read_parquet($snapshot)", params={"snapshot": "x"})
    first, second = control.compile(relation), control.compile(relation)
    assert first == second
    for name in control.required_columns():
        assert name in names.values()
        assert '"' + name.replace('"', '""') + '"' in first.sql
    for value in case.bound_values:
        assert value not in first.sql


@cases
def test_passes_on_a_clean_snapshot(
    case: ControlCase, tmp_path: Path, snapshot_format: str
) -> None:
    control = parse_control_spec(case.make_spec(case.columns))
    path = write_snapshot(
        tmp_path / f"clean.{snapshot_format}", rows_as(case, case.passing_rows, case.columns)
    )
    result = run_control(control, path)
    assert result.passed
    assert result.violation_count == 0
    assert result.rows_scanned == len(case.passing_rows)
    assert result.sample == []
    assert result.snapshot_id == "clean"


@cases
@pytest.mark.parametrize("naming", ["plain", "hostile"])
def test_fails_on_a_bad_snapshot_with_exact_count_and_sample(
    case: ControlCase, tmp_path: Path, snapshot_format: str, naming: str
) -> None:
    names = case.columns if naming == "plain" else hostile_names(case)
    control = parse_control_spec(case.make_spec(names))
    path = write_snapshot(
        tmp_path / f"bad.{snapshot_format}", rows_as(case, case.failing_rows, names)
    )
    result = run_control(control, path)
    assert not result.passed
    assert result.violation_count == case.expected_violations
    assert result.rows_scanned == len(case.failing_rows)
    first = result.sample[0]
    for key, value in case.expected_first_sample.items():
        assert first[key] == value
    assert len(result.sample) <= 5


@cases
def test_schema_drift_names_the_missing_column(
    case: ControlCase, tmp_path: Path, snapshot_format: str
) -> None:
    control = parse_control_spec(case.make_spec(case.columns))
    dropped_role = next(iter(case.columns))
    dropped = case.columns[dropped_role]
    rows = [
        {k: v for k, v in row.items() if k != dropped}
        for row in rows_as(case, case.passing_rows, case.columns)
    ]
    path = write_snapshot(tmp_path / f"drifted.{snapshot_format}", rows)
    with pytest.raises(SchemaDriftError) as raised:
        run_control(control, path)
    assert raised.value.missing == [dropped]
    assert repr(dropped) in str(raised.value)


@cases
def test_missing_and_unreadable_snapshots_are_clear_errors(
    case: ControlCase, tmp_path: Path
) -> None:
    control = parse_control_spec(case.make_spec(case.columns))
    with pytest.raises(SnapshotNotFoundError, match="not found"):
        run_control(control, tmp_path / "absent.parquet")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(SnapshotUnreadableError, match=r"corrupt\.parquet"):
        run_control(control, corrupt)
    unsupported = tmp_path / "data.xlsx"
    unsupported.write_bytes(b"x")
    with pytest.raises(SnapshotUnreadableError, match=r"unsupported snapshot format '\.xlsx'"):
        run_control(control, unsupported)


@cases
def test_partitioned_relation_matches_single_snapshot_runs(
    case: ControlCase, tmp_path: Path
) -> None:
    """Backtests evaluate many snapshots in one query; per-partition rows must match single runs."""
    control = parse_control_spec(case.make_spec(case.columns))
    clean = write_snapshot(tmp_path / "s1.parquet", rows_as(case, case.passing_rows, case.columns))
    bad = write_snapshot(tmp_path / "s2.parquet", rows_as(case, case.failing_rows, case.columns))
    relation = Relation(
        sql="SELECT parse_filename(src, true) AS part, * "
        "FROM read_parquet($files, filename = 'src', union_by_name = true)",
        params={"files": [str(clean), str(bad)]},
        partition_column="part",
    )
    query = control.compile(relation)
    rows = duckdb.connect().execute(query.sql, query.params).fetchall()
    singles = [run_control(control, path) for path in (clean, bad)]
    assert [row[0] for row in rows] == ["s1", "s2"]
    for row, single in zip(rows, singles, strict=True):
        _, rows_scanned, violation_count, sample = row
        assert (rows_scanned, violation_count) == (single.rows_scanned, single.violation_count)
        assert [control.sample_row(item) for item in sample or []] == single.sample


def test_snapshot_file_reports_its_columns(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "s.csv", [{"a": 1, HOSTILE_NAMES[0]: 2}])
    assert SnapshotFile.from_path(path).columns(duckdb.connect()) == ["a", HOSTILE_NAMES[0]]
