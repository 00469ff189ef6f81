"""A control type's conformance case, and snapshots written under any column names.

Rows are given per logical column role, so the same data can be written under ordinary or
hostile names (:data:`HOSTILE_NAMES`)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
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


def write_snapshot(
    path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None
) -> Path:
    """Write rows (dicts) as Parquet or CSV according to the suffix of ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = columns or list(rows[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(names)
            for row in rows:
                writer.writerow(["" if row.get(n) is None else row.get(n) for n in names])
    else:
        pq.write_table(pa.table({n: [row.get(n) for row in rows] for n in names}), path)
    return path


def rows_as(roles: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """Rows given by role, written under ``names`` (role -> column name)."""
    return [{names[role]: value for role, value in row.items()} for row in roles]


def hostile_names(case: ControlCase) -> dict[str, str]:
    """Each of the case's roles under a hostile column name of its own."""
    return {
        role: HOSTILE_NAMES[i % len(HOSTILE_NAMES)] + f"#{i}" for i, role in enumerate(case.columns)
    }
