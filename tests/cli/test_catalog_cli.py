"""``init``, ``load`` and ``steward`` on the embedded store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.emitter.mce_builder import make_dataset_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper as MCP
from datahub.ingestion.sink.file import write_metadata_file
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DatasetPropertiesClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    StructuredPropertiesClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.main import cli
from reflex_actions.vocabulary import OWNERSHIP_CHANGE_APPROVAL

INCIDENT = "urn:li:incident:cli-test"
PAYMENTS = make_dataset_urn("snowflake", "finance.payments")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def version_rows(store: Path) -> int:
    return sqlite3.connect(store).execute("SELECT count(*) FROM metadata_aspect_v2").fetchone()[0]


def test_init_is_idempotent(tmp_path: Path) -> None:
    store = tmp_path / "reflex.db"
    assert run("init", "--store", str(store))[0] == 0
    rows = version_rows(store)
    assert rows == 2 * 12  # 11 property definitions + the lessons node, each v0 + v1
    assert run("init", "--store", str(store))[0] == 0
    assert version_rows(store) == rows


def test_load_then_steward_actions_record_the_actor(tmp_path: Path) -> None:
    store = tmp_path / "reflex.db"
    metadata = tmp_path / "estate.json"
    incident = IncidentInfoClass(
        type=IncidentTypeClass.OPERATIONAL,
        title="Duplicate payments",
        entities=[PAYMENTS],
        status=IncidentStatusClass(
            state=IncidentStateClass.ACTIVE,
            lastUpdated=AuditStampClass(0, "urn:li:corpuser:datahub"),
        ),
        created=AuditStampClass(0, "urn:li:corpuser:datahub"),
    )
    payments = DatasetPropertiesClass(name="payments")
    write_metadata_file(
        metadata,
        [MCP(entityUrn=INCIDENT, aspect=incident), MCP(entityUrn=PAYMENTS, aspect=payments)],
    )
    code, output = run("load", str(metadata), "--store", str(store))
    assert code == 0 and "loaded 2 aspects" in output

    code, _ = run(
        "steward",
        "resolve-incident",
        INCIDENT,
        "--note",
        "idempotent loader",
        "--as",
        "carol",
        "--store",
        str(store),
    )
    assert code == 0
    code, _ = run(
        "steward",
        "set-property",
        PAYMENTS,
        "reflex.ownershipChangeApproval",
        "PENDING",
        "--as",
        "carol",
        "--store",
        str(store),
    )
    assert code == 0

    catalog = LiteCatalog(store)
    resolved = catalog.incident(INCIDENT)
    assert resolved is not None
    assert (resolved.state, resolved.resolution_note) == ("RESOLVED", "idempotent loader")
    assert resolved.last_updated_by == "urn:li:corpuser:carol"
    properties = catalog.get_aspect(PAYMENTS, StructuredPropertiesClass)
    assert properties is not None
    assert [(p.propertyUrn, p.values) for p in properties.properties] == [
        (OWNERSHIP_CHANGE_APPROVAL, ["PENDING"])
    ]
    system_metadata = (
        sqlite3.connect(store)
        .execute(
            "SELECT system_metadata FROM metadata_aspect_v2 "
            "WHERE aspect_name = 'structuredProperties' AND version = 1"
        )
        .fetchone()[0]
    )
    assert json.loads(system_metadata)["properties"]["actor"] == "urn:li:corpuser:carol"


def test_bad_inputs_exit_2(tmp_path: Path) -> None:
    store = str(tmp_path / "reflex.db")
    assert run("init", "--store", store)[0] == 0
    code, output = run(
        "steward",
        "resolve-incident",
        "urn:li:incident:nope",
        "--note",
        "x",
        "--as",
        "a",
        "--store",
        store,
    )
    assert code == 2 and "no incident 'urn:li:incident:nope' in the store" in output
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    code, output = run("load", str(garbage), "--store", store)
    assert code == 2 and "cannot read metadata file" in output


def test_demo_refuses_a_folder_that_is_not_its_own(tmp_path: Path) -> None:
    keep = tmp_path / "important.txt"
    keep.write_text("do not delete")
    code, output = run("demo", "--dir", str(tmp_path))
    assert code == 2
    assert "holds no earlier demo" in output
    assert keep.read_text() == "do not delete"


def test_demo_takes_a_symlinked_store_for_no_earlier_demo(tmp_path: Path) -> None:
    """Only a regular ``reflex.db`` marks an earlier demo's folder, which the demo empties."""
    outside = tmp_path / "outside.db"
    outside.write_text("theirs")
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "reflex.db").symlink_to(outside)
    keep = workdir / "important.txt"
    keep.write_text("do not delete")

    code, output = run("demo", "--dir", str(workdir))

    assert code == 2 and "holds no earlier demo" in output
    assert keep.read_text() == "do not delete" and outside.read_text() == "theirs"


def test_demo_given_a_symlinked_folder_empties_the_folder_and_keeps_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder named through a symlink is the user's choice: an earlier demo's is emptied."""
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "reflex.db").write_text("an earlier demo's store")
    (earlier / "snapshots").mkdir()
    link = tmp_path / "demo"
    link.symlink_to(earlier)
    given: list[Path] = []

    def run_demo(workdir: Path, say: object, scenarios: object) -> bool:
        given.append(workdir)
        return True

    monkeypatch.setattr("reflex_actions.demo.run.run_demo", run_demo)
    code, output = run("demo", "--dir", str(link))

    assert code == 0, output
    assert given == [link] and link.is_symlink() and list(earlier.iterdir()) == []
