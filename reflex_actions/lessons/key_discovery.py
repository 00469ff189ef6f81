"""Find the key a duplicate-rows incident broke, from the dataset's own history.

A key candidate is a field that is unique in every normal (unlabelled) snapshot and duplicated in
the incident's failure snapshot(s). All candidate fields of all snapshots are counted in one
DuckDB query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import FieldInfo
from reflex_actions.snapshots import FILE_COLUMN, duckdb_connection, files_relation
from reflex_actions.sql import quote_identifier

#: DataHub type classes that can hold an identifier.
KEY_TYPES = {"string", "number", None}


@dataclass(frozen=True)
class KeyFinding:
    field: str
    failure_snapshots: tuple[str, ...]
    duplicate_rows: int
    normal_snapshots: int


def failure_snapshots(history: History, incident_urn: str) -> list[str]:
    """Snapshots labelled with this incident, else every labelled failure."""
    own = [sid for sid, label in history.labels.items() if label.incident == incident_urn]
    return sorted(own or history.labels)


def fields_broken_in_failures(
    history: History,
    incident_urn: str,
    candidates: list[str],
    offending: Callable[[str], str],
) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(field, failure snapshots, offending rows there, normal snapshots) for each candidate
    field whose offending-row count — the SQL aggregate ``offending(quoted column)`` — is 0 in
    every normal snapshot and above 0 in a failure snapshot of this incident. One DuckDB query
    over the history; empty without a labelled failure or a readable snapshot."""
    import duckdb  # here, not at module level: loading the kinds starts no engine

    failures = set(failure_snapshots(history, incident_urn))
    if not failures or not candidates:
        return []
    con = duckdb_connection()
    usable = history.snapshots_with(con, candidates)
    if not usable:
        return []
    relation = files_relation(usable, candidates)
    counts = ", ".join(offending(quote_identifier(name)) for name in candidates)
    sql = (
        f"WITH snapshot AS ({relation.sql}) "
        f"SELECT {quote_identifier(FILE_COLUMN)}, {counts} FROM snapshot GROUP BY 1"
    )
    try:
        rows = con.execute(sql, relation.params).fetchall()
    except duckdb.Error:
        return []
    ids = {str(s.path): s.snapshot_id for s in usable}
    found = []
    for index, name in enumerate(candidates):
        offending_rows = {ids[row[0]]: row[1 + index] for row in rows}
        # snapshots labelled with other failures are neither normal nor this incident's
        normal = [sid for sid in offending_rows if sid not in history.labels]
        failed = tuple(
            sorted(sid for sid in offending_rows if sid in failures and offending_rows[sid] > 0)
        )
        if failed and normal and all(offending_rows[sid] == 0 for sid in normal):
            found.append((name, failed, sum(offending_rows[sid] for sid in failed), len(normal)))
    return found


def discover_keys(history: History, fields: list[FieldInfo], incident_urn: str) -> list[KeyFinding]:
    """Fields unique in every normal snapshot and duplicated in a failure snapshot, key-flagged
    fields first. Empty when the history has no labelled failure or no readable snapshot."""
    candidates = [f.name for f in fields if f.type in KEY_TYPES]
    findings = [
        KeyFinding(*found)
        for found in fields_broken_in_failures(
            history, incident_urn, candidates, lambda column: f"count(*) - count(DISTINCT {column})"
        )
    ]
    key_flagged = {f.name for f in fields if f.is_key}
    return sorted(findings, key=lambda k: (k.field not in key_flagged, k.field))
