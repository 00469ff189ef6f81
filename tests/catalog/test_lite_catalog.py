"""Behaviour specific to the embedded store: bad rows, other writers, concurrent processes."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from datahub.emitter.mce_builder import make_dataset_urn, make_domain_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper as MCP
from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig
from datahub.metadata.schema_classes import AssertionRunEventClass, DomainsClass, StatusClass

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.directives import Emit, SetProperties, apply
from reflex_actions.handlers.lesson_store import structured_values

PAYMENTS = make_dataset_urn("snowflake", "finance.payments")
FINANCE = make_domain_urn("finance")


def test_malformed_value_in_the_store_is_a_named_error(tmp_path: Path) -> None:
    catalog = LiteCatalog(tmp_path / "s.db")
    catalog.emit([MCP(entityUrn=PAYMENTS, aspect=DomainsClass(domains=[FINANCE]))])
    raw = sqlite3.connect(tmp_path / "s.db")
    raw.execute("UPDATE metadata_aspect_v2 SET metadata = '{\"domains\": 7}' WHERE version = 0")
    raw.commit()
    with pytest.raises(CatalogError, match=r"malformed domains aspect on urn:li:dataset:"):
        catalog.dataset(PAYMENTS)


def test_a_store_lock_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    """Taking the write lock creates the lock file: never through a symlink, out of the
    store's folder."""
    outside = tmp_path / "elsewhere" / "made.txt"
    outside.parent.mkdir()
    (tmp_path / "s.db.lock").symlink_to(outside)

    with pytest.raises(ReflexError, match=r"'s\.db\.lock' in .* is a symlink"):
        LiteCatalog(tmp_path / "s.db")

    assert list(outside.parent.iterdir()) == []


def test_index_sees_writes_made_by_another_lite_writer(tmp_path: Path) -> None:
    """e.g. ``datahub ingest`` with the Lite sink, which knows nothing about Reflex's index."""
    catalog = LiteCatalog(tmp_path / "s.db")
    assert catalog.datasets_by_domain(FINANCE) == []
    other = SqliteLite(SqliteLiteConfig(file=str(tmp_path / "s.db")))
    other.write(MCP(entityUrn=PAYMENTS, aspect=DomainsClass(domains=[FINANCE])))
    other._close_connection()
    assert catalog.datasets_by_domain(FINANCE) == [PAYMENTS]


def _write_many(path: str, worker: int) -> None:
    catalog = LiteCatalog(path)
    for i in range(25):
        catalog.emit([MCP(entityUrn=PAYMENTS, aspect=StatusClass(removed=(i + worker) % 2 == 0))])
    catalog.close()


def test_concurrent_processes_do_not_corrupt_versions(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    LiteCatalog(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(path, n)) for n in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    rows = (
        sqlite3.connect(path)
        .execute(
            "SELECT version, metadata FROM metadata_aspect_v2 WHERE aspect_name = 'status' "
            "ORDER BY version"
        )
        .fetchall()
    )
    versions = [version for version, _ in rows]
    # one contiguous version chain, and version 0 mirrors the newest
    assert versions[1:] == list(range(1, len(versions)))
    assert json.loads(rows[0][1]) == json.loads(rows[-1][1])


def test_an_assertions_runs_of_one_id_are_found_through_an_index(tmp_path: Path) -> None:
    """ "Already judged" asks for the runs of one id: read through the run-id index, not every
    run the assertion ever had (a sweep each hour for a year is 8,760 of them)."""
    catalog = LiteCatalog(tmp_path / "reflex.db")
    asked: list[str] = []
    catalog._db.set_trace_callback(asked.append)
    catalog.timeseries_written(
        "urn:li:assertion:a", AssertionRunEventClass, limit=5, where={"runId": "scheduled-x"}
    )
    catalog._db.set_trace_callback(None)
    (query,) = [q for q in asked if q.startswith("SELECT metadata")]
    plan = catalog._db.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()
    assert "USING INDEX reflex_run_ids" in " ".join(str(row) for row in plan)
    catalog.close()


def _batch() -> list[MCP]:
    """A batch as a sweep writes one, and what Lite's versioning tells apart: a new aspect, a
    changed one, an unchanged one (a dup), a timeseries value, one urn twice, an MCP with no
    system metadata, one whose write adds a browse edge."""
    from datahub.metadata.schema_classes import (
        DatasetPropertiesClass,
        SystemMetadataClass,
    )

    from reflex_actions.catalog.steward import acting_as

    run = "urn:li:assertion:reflex-1"
    return [
        acting_as("urn:li:corpuser:reflex", PAYMENTS, DomainsClass(domains=[FINANCE])),
        MCP(entityUrn=PAYMENTS, aspect=StatusClass(removed=False)),
        MCP(entityUrn=PAYMENTS, aspect=DatasetPropertiesClass(name="payments")),
        *(
            acting_as(
                "urn:li:corpuser:reflex",
                run,
                AssertionRunEventClass(
                    timestampMillis=1_700_000_000_000 + i,
                    runId=f"run-{i}",
                    asserteeUrn=PAYMENTS,
                    assertionUrn=run,
                    status="COMPLETE",
                ),
            )
            for i in range(3)
        ),
        MCP(
            entityUrn=PAYMENTS,
            aspect=StatusClass(removed=True),
            systemMetadata=SystemMetadataClass(lastObserved=1_600_000_000_000, runId="x"),
        ),
    ]


def _rows(path: Path) -> list[tuple[object, ...]]:
    """Every row Lite keeps, in the order written (``createdon`` is the wall clock's)."""
    with sqlite3.connect(path) as db:
        return [
            *db.execute(
                "SELECT rowid, urn, aspect_name, version, metadata, system_metadata"
                " FROM metadata_aspect_v2 ORDER BY rowid"
            ),
            *db.execute("SELECT * FROM metadata_edge_v2 ORDER BY rowid"),
        ]


def test_a_batch_is_written_row_for_row_as_lite_writes_it_with_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``emit`` writes what Lite's own ``write`` of each MCP writes (the same versions, JSON
    and rows, in the same order, dups included), reading the batch's current rows in one
    query per aspect name instead of one per MCP."""
    import time

    monkeypatch.setattr(time, "time", lambda: 1_750_000_000.0)  # Lite stamps lastObserved
    by_lite = SqliteLite(SqliteLiteConfig(file=str(tmp_path / "lite.db")))
    catalog = LiteCatalog(tmp_path / "reflex.db")
    for store_batch in (_batch()[:2], _batch()):  # the second batch: changes and dups
        for mcp in store_batch:
            by_lite.write(mcp)
        statements: list[str] = []
        catalog._db.set_trace_callback(statements.append)
        catalog.emit(_batch()[: len(store_batch)])
        catalog._db.set_trace_callback(None)
        reads = [s for s in statements if s.startswith("SELECT") and "metadata_aspect_v2" in s]
        names = {mcp.aspectName for mcp in store_batch}
        assert len(reads) == len(names), reads
    by_lite._close_connection()
    catalog.close()
    lite_rows, reflex_rows = _rows(tmp_path / "lite.db"), _rows(tmp_path / "reflex.db")
    assert len(lite_rows) > len(_batch()) + 2  # new, changed and timeseries rows were written
    assert reflex_rows == lite_rows


def test_system_metadata_is_converted_as_avrogen_converts_it() -> None:
    """The embedded store converts a writer's system metadata once per distinct value: the
    same dict as ``to_obj()`` each time, a copy the write may add to."""
    from datahub.metadata.schema_classes import SystemMetadataClass

    from reflex_actions.catalog.lite import _system_obj

    values = [
        SystemMetadataClass(properties={"actor": "urn:li:corpuser:reflex"}),
        SystemMetadataClass(properties={"actor": "urn:li:corpuser:other"}),
        SystemMetadataClass(lastObserved=1, runId="r", properties={"a": "1", "b": "2"}),
        SystemMetadataClass(lastObserved=True, runId="r"),  # True == 1: kept apart
        SystemMetadataClass(),
    ]
    for system in [*values, *values]:
        converted = _system_obj(system)
        assert converted == system.to_obj() and type(converted) is type(system.to_obj())
        assert json.dumps(converted) == json.dumps(system.to_obj())
        converted.setdefault("properties", {})["sysVersion"] = "7"
    assert "sysVersion" not in (_system_obj(values[0])["properties"])


def test_what_the_batch_writer_does_not_reproduce_goes_to_lites_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MCE (Lite writes each of its aspects) among plain MCPs: the rows are Lite's still,
    the MCPs after it reading the rows it wrote."""
    import time

    from datahub.metadata.schema_classes import (
        DatasetSnapshotClass,
        MetadataChangeEventClass,
    )

    monkeypatch.setattr(time, "time", lambda: 1_750_000_000.0)
    snapshot = MetadataChangeEventClass(
        proposedSnapshot=DatasetSnapshotClass(
            urn=PAYMENTS, aspects=[StatusClass(removed=True), DomainsClass(domains=["x"])]
        )
    )
    batch = [*_batch()[:2], snapshot, *_batch()[:2]]
    by_lite = SqliteLite(SqliteLiteConfig(file=str(tmp_path / "lite.db")))
    for record in batch:
        by_lite.write(record)  # type: ignore[arg-type]
    by_lite._close_connection()
    catalog = LiteCatalog(tmp_path / "reflex.db")
    catalog.emit(batch)  # type: ignore[arg-type]
    catalog.close()
    assert _rows(tmp_path / "reflex.db") == _rows(tmp_path / "lite.db")


def test_a_decision_is_written_in_one_commit_or_not_at_all(tmp_path: Path) -> None:
    """The applier writes a decision within ``one_decision``: on the embedded store one
    transaction, so its writes cost one commit, and a write failing midway leaves none of
    those before it."""
    catalog = LiteCatalog(tmp_path / "reflex.db")
    urns = [make_dataset_urn("postgres", f"db.t{n}") for n in range(3)]
    property_urn = "urn:li:structuredProperty:reflex.coverage"
    decision = [
        Emit((MCP(entityUrn=urns[0], aspect=StatusClass(removed=False)),)),
        SetProperties(urns[1], {property_urn: ["urn:li:glossaryTerm:x"]}),
        Emit((MCP(entityUrn=urns[2], aspect=StatusClass(removed=True)),)),
    ]
    statements: list[str] = []
    catalog._db.set_trace_callback(statements.append)
    apply(decision, catalog, "urn:li:corpuser:reflex")
    catalog._db.set_trace_callback(None)
    assert [s for s in statements if s.strip().upper() == "COMMIT"] == ["COMMIT"]
    assert catalog.get_aspect(urns[2], StatusClass) == StatusClass(removed=True)

    failing = [
        Emit((MCP(entityUrn=urns[0], aspect=StatusClass(removed=True)),)),
        SetProperties(urns[1], {property_urn: []}),
        Emit((MCP(entityUrn=urns[2], aspect=StatusClass(removed=False)),)),
    ]

    def refused(mcps: Sequence[MCP]) -> None:
        if mcps[0].entityUrn == urns[2]:
            raise CatalogError("the disk is full")
        LiteCatalog.emit(catalog, mcps)

    catalog.emit = refused  # type: ignore[method-assign]
    with pytest.raises(CatalogError, match="the disk is full"):
        apply(failing, catalog, "urn:li:corpuser:reflex")
    del catalog.emit
    assert catalog.get_aspect(urns[0], StatusClass) == StatusClass(removed=False)
    assert structured_values(catalog, urns[1], property_urn) == ["urn:li:glossaryTerm:x"]
    catalog.emit([MCP(entityUrn=urns[0], aspect=StatusClass(removed=True))])  # the lock is free
    assert catalog.get_aspect(urns[0], StatusClass) == StatusClass(removed=True)
    catalog.close()
