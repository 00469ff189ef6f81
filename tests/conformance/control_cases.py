"""One conformance case per control type: what every control type must get right.

A kind's conformance module gives its control's case (see ``reflex_actions.testing``).
"""

from __future__ import annotations

from reflex_actions.testing.cases import HOSTILE_NAMES, ControlCase

__all__ = ["HOSTILE_NAMES", "ControlCase"]

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
