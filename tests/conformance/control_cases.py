"""One conformance case per control type: what every control type must get right.

A kind's conformance module gives its control's case (see ``kind_suite``). Rows are given per
logical column role so the same data can be written under ordinary or hostile names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reflex_actions.times import parse_instant

HOSTILE_NAMES = ['a"b; DROP TABLE t; --', "select", "x'); DELETE FROM y; --", "ünï cödé $1 ?"]


@dataclass(frozen=True)
class ControlCase:
    type_name: str
    #: logical role -> default column name
    columns: dict[str, str]
    #: builds a spec from role -> actual column name
    make_spec: Callable[[dict[str, str]], dict[str, Any]]
    passing_rows: list[dict[str, Any]]
    failing_rows: list[dict[str, Any]]
    expected_violations: int
    expected_first_sample: dict[str, Any]
    #: specs that must be rejected, with a fragment the error must contain
    invalid_specs: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    #: spec values that must be bound as parameters, never appear in the SQL text
    bound_values: list[str] = field(default_factory=list)
    #: the referenced (parent) dataset's rows, for a control checked against another dataset
    reference_rows: list[dict[str, Any]] = field(default_factory=list)
    #: the time single runs are judged at (ISO 8601), for a control judged as of a time
    as_of: str | None = None

    @property
    def as_of_ms(self) -> int | None:
        return parse_instant(self.as_of) if self.as_of else None


UNIQUENESS = ControlCase(
    type_name="uniqueness",
    columns={"key": "transaction_id", "amount": "amount"},
    make_spec=lambda c: {"type": "uniqueness", "field": c["key"]},
    passing_rows=[{"key": f"t{i}", "amount": i} for i in range(6)],
    failing_rows=[
        {"key": "t1", "amount": 1},
        {"key": "t1", "amount": 1},
        {"key": "t1", "amount": 1},
        {"key": "t2", "amount": 2},
        {"key": "t2", "amount": 2},
        {"key": "t3", "amount": 3},
        {"key": None, "amount": 4},
        {"key": None, "amount": 5},
    ],
    expected_violations=3,
    expected_first_sample={"occurrences": 3},
    invalid_specs=[
        ({"type": "uniqueness"}, "exactly one of 'field'"),
        ({"type": "uniqueness", "field": "a", "fields": ["b"]}, "exactly one of 'field'"),
        ({"type": "uniqueness", "fields": []}, "fields"),
        ({"type": "uniqueness", "fields": ["a", "a"]}, "twice"),
        ({"type": "uniqueness", "field": "a", "max_duplicate_count": -1}, "max_duplicate_count"),
        ({"type": "uniqueness", "field": ""}, "empty"),
    ],
)

ACTIVE_OWNERSHIP = ControlCase(
    type_name="active_ownership",
    columns={
        "dataset": "dataset_urn",
        "owner": "owner_urn",
        "ownership_type": "ownership_type",
        "owner_status": "owner_status",
    },
    make_spec=lambda c: {
        "type": "active_ownership",
        "min_active_owners": 1,
        "owner_types": ["TECHNICAL_OWNER", "DATA_STEWARD"],
        "columns": {
            role: c[role] for role in ("dataset", "owner", "ownership_type", "owner_status")
        },
    },
    passing_rows=[
        {
            "dataset": "ds:a",
            "owner": "u:1",
            "ownership_type": "TECHNICAL_OWNER",
            "owner_status": "ACTIVE",
        },
        {
            "dataset": "ds:b",
            "owner": "u:2",
            "ownership_type": "DATA_STEWARD",
            "owner_status": "ACTIVE",
        },
        {
            "dataset": "ds:b",
            "owner": "u:3",
            "ownership_type": "TECHNICAL_OWNER",
            "owner_status": "SUSPENDED",
        },
    ],
    failing_rows=[
        # only owner left the company
        {
            "dataset": "ds:a",
            "owner": "u:1",
            "ownership_type": "TECHNICAL_OWNER",
            "owner_status": "SUSPENDED",
        },
        # active, but not an owner type that counts
        {
            "dataset": "ds:b",
            "owner": "u:2",
            "ownership_type": "BUSINESS_OWNER",
            "owner_status": "ACTIVE",
        },
        # healthy
        {
            "dataset": "ds:c",
            "owner": "u:2",
            "ownership_type": "TECHNICAL_OWNER",
            "owner_status": "ACTIVE",
        },
        # no owner at all
        {"dataset": "ds:d", "owner": None, "ownership_type": None, "owner_status": None},
    ],
    expected_violations=3,
    expected_first_sample={"dataset": "ds:a", "active_owners": 0},
    invalid_specs=[
        ({"type": "active_ownership", "min_active_owners": 0}, "min_active_owners"),
        ({"type": "active_ownership", "owner_types": []}, "owner_types"),
        ({"type": "active_ownership", "owner_types": [" "]}, "empty ownership type"),
        (
            {"type": "active_ownership", "columns": {"datasett": "x"}},
            "unknown key 'columns.datasett'",
        ),
    ],
    bound_values=["TECHNICAL_OWNER", "DATA_STEWARD", "ACTIVE"],
)
