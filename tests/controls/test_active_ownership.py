"""Semantics specific to the active-ownership control."""

from __future__ import annotations

from pathlib import Path

from reflex_actions.controls.active_ownership import ActiveOwnershipControl
from reflex_actions.executor import run_control
from reflex_actions.sql import FILTER_DIALECTS
from tests.conformance.dialect_rendering import (
    RecordingEngine,
    check_every_dialect,
    table_relation,
)
from tests.conftest import write_snapshot


def edge(dataset: str, owner: str | None, kind: str | None, status: str | None) -> dict:
    return {
        "dataset_urn": dataset,
        "owner_urn": owner,
        "ownership_type": kind,
        "owner_status": status,
    }


EDGES = [
    edge("ds:a", "u:1", "TECHNICAL_OWNER", "ACTIVE"),
    edge("ds:a", "u:1", "DATA_STEWARD", "ACTIVE"),  # same person twice counts once
    edge("ds:b", "u:2", "TECHNICAL_OWNER", "ACTIVE"),
    edge("ds:b", "u:3", "TECHNICAL_OWNER", "ACTIVE"),
    edge("ds:c", "u:4", "BUSINESS_OWNER", "ACTIVE"),
    edge("ds:c", "u:5", "TECHNICAL_OWNER", "SUSPENDED"),
]


def test_distinct_active_owners_are_counted(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "owners.csv", EDGES)
    two_needed = run_control(ActiveOwnershipControl(min_active_owners=2), path)
    # ds:a has one distinct person, ds:c one active (u:4); ds:b has two
    assert two_needed.violation_count == 2
    assert [item["dataset"] for item in two_needed.sample] == ["ds:a", "ds:c"]
    assert [item["active_owners"] for item in two_needed.sample] == [1, 1]


def test_owner_types_restrict_who_counts(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "owners.parquet", EDGES)
    technical = run_control(ActiveOwnershipControl(owner_types=["TECHNICAL_OWNER"]), path)
    assert technical.violation_count == 1
    assert technical.sample == [
        {"dataset": "ds:c", "active_owners": 0, "owners_of_unknown_status": 0}
    ]
    any_type = run_control(ActiveOwnershipControl(), path)
    assert any_type.passed


def test_an_owner_of_unknown_status_is_neither_active_nor_departed(tmp_path: Path) -> None:
    """Ingested users often have no corpUserStatus: such an owner is not counted as gone (no
    false alarm), and the result says how many owners are of unknown status."""
    edges = [
        edge("ds:known", "u:1", "TECHNICAL_OWNER", None),
        edge("ds:blank", "u:2", "TECHNICAL_OWNER", ""),
        edge("ds:left", "u:3", "TECHNICAL_OWNER", "SUSPENDED"),
        edge("ds:left", "u:4", "TECHNICAL_OWNER", None),
        edge("ds:none", None, None, None),
    ]
    path = write_snapshot(tmp_path / "owners.parquet", edges)
    one = run_control(ActiveOwnershipControl(), path)
    assert one.sample == [{"dataset": "ds:none", "active_owners": 0, "owners_of_unknown_status": 0}]
    two = run_control(ActiveOwnershipControl(min_active_owners=2), path)
    assert {item["dataset"]: item["owners_of_unknown_status"] for item in two.sample} == {
        "ds:none": 0,
        "ds:blank": 1,
        "ds:known": 1,
        "ds:left": 1,
    }


def test_custom_column_names(tmp_path: Path) -> None:
    renamed = [
        {
            "asset": e["dataset_urn"],
            "who": e["owner_urn"],
            "kind": e["ownership_type"],
            "state": e["owner_status"],
        }
        for e in EDGES
    ]
    path = write_snapshot(tmp_path / "owners.parquet", renamed)
    control = ActiveOwnershipControl.model_validate(
        {
            "owner_types": ["TECHNICAL_OWNER"],
            "columns": {
                "dataset": "asset",
                "owner": "who",
                "ownership_type": "kind",
                "owner_status": "state",
            },
        }
    )
    assert run_control(control, path).violation_count == 1


HOSTILE = {
    "dataset": 'asset"; DROP TABLE t; --',
    "owner": "select",
    "ownership_type": "x'); DELETE FROM y; --",
    "owner_status": "ünï cödé $1 ?",
}


def test_counts_and_sample_render_in_every_dialect() -> None:
    """The owner types and the active status are bound values (one placeholder per type), the
    columns quoted the dialect's way, and nothing is DuckDB-only."""
    control = ActiveOwnershipControl.model_validate(
        {"owner_types": ["TECHNICAL_OWNER", "DATA_STEWARD"], "columns": HOSTILE}
    )
    texts = check_every_dialect(
        control,
        table_relation(),
        HOSTILE.values(),
        ["TECHNICAL_OWNER", "DATA_STEWARD", "ACTIVE", "2026-01-01"],
    )
    for dialect, (counts, sample) in texts.items():
        assert ("FILTER" in counts + sample) == (dialect in FILTER_DIALECTS), dialect
        assert "LIMIT 5" in sample, (dialect, sample)
    query = control.compile(table_relation())
    assert sorted(query.params.values(), key=str) == [
        1,
        "ACTIVE",
        "DATA_STEWARD",
        "TECHNICAL_OWNER",
    ]


def test_a_passing_check_fetches_only_its_counts(tmp_path: Path) -> None:
    """The under-owned datasets are listed only when there are some, fewest owners first."""
    path = write_snapshot(tmp_path / "owners.parquet", EDGES)
    passing, failing = RecordingEngine(), RecordingEngine()
    assert run_control(ActiveOwnershipControl(), path, engine=passing).passed
    result = run_control(ActiveOwnershipControl(min_active_owners=3), path, engine=failing)
    assert (len(passing.fetched), len(failing.fetched)) == (1, 2)
    assert [(item["dataset"], item["active_owners"]) for item in result.sample] == [
        ("ds:a", 1),
        ("ds:c", 1),
        ("ds:b", 2),
    ]
    assert (result.violation_count, result.rows_scanned) == (3, 6)
