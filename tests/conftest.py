"""Shared fixtures: writing small snapshot tables to Parquet or CSV."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

SnapshotWriter = Callable[[Path, list[dict[str, Any]]], Path]


def write_snapshot(
    path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None
) -> Path:
    """Write rows (dicts) as Parquet or CSV according to the suffix of ``path``."""
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


@pytest.fixture(params=["parquet", "csv"])
def snapshot_format(request: pytest.FixtureRequest) -> str:
    return request.param
