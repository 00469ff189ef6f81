"""The demo estate's metadata file: current, read by `datahub ingest`, matching the histories."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from datahub.ingestion.run.pipeline import Pipeline

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.cli.main import cli
from reflex_actions.demo.estate import DATASETS, dataset_urn
from reflex_actions.demo.history import OWNERSHIP_INCIDENT, PAYMENTS_INCIDENT
from reflex_actions.demo.metadata import ESTATE_FILE, write_estate_file
from reflex_actions.snapshots import SnapshotFile

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"


def test_shipped_file_is_current(tmp_path: Path) -> None:
    fresh = write_estate_file(tmp_path / "estate.json")
    assert json.loads(fresh.read_text()) == json.loads(ESTATE_FILE.read_text())


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> LiteCatalog:
    store = tmp_path_factory.mktemp("estate") / "reflex.db"
    result = CliRunner().invoke(cli, ["load", str(ESTATE_FILE), "--store", str(store)])
    assert result.exit_code == 0, result.output
    return LiteCatalog(store)


def test_loaded_estate_matches_the_estate_model(loaded: LiteCatalog) -> None:
    for name, dataset in DATASETS.items():
        context = loaded.dataset(dataset.urn)
        assert context is not None, name
        assert [f.name for f in context.fields] == [f.name for f in dataset.fields]
        assert [f.name for f in context.fields if f.is_key] == dataset.key_fields
        assert context.domain == f"urn:li:domain:{dataset.domain}"
        assert set(context.upstreams) == {dataset_urn(u) for u in dataset.upstreams}
    payments = dataset_urn("finance.payments")
    assert set(loaded.downstreams(payments)) == {
        d.urn for d in DATASETS.values() if "finance.payments" in d.upstreams
    }
    # bob left on 2026-09-15 and handed over to carol; dave has not left yet
    assert loaded.user_status("urn:li:corpuser:bob") == "SUSPENDED"
    assert loaded.user_status("urn:li:corpuser:dave") == "ACTIVE"
    assert "urn:li:corpuser:bob" not in {o.owner for o in loaded.dataset(payments).owners}
    for incident in (PAYMENTS_INCIDENT, OWNERSHIP_INCIDENT):
        assert loaded.incident(incident).state == "ACTIVE"


def test_every_history_matches_its_dataset_schema(loaded: LiteCatalog) -> None:
    con = duckdb.connect()
    for folder in SNAPSHOTS.iterdir():
        if folder.name not in DATASETS:
            continue
        context = loaded.dataset(dataset_urn(folder.name))
        first = SnapshotFile.from_path(sorted(folder.glob("2026-09-01.*"))[0])
        assert first.columns(con) == [f.name for f in context.fields], folder.name


def test_datahub_ingest_reads_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file a DataHub server user ingests: file source, here into a Lite sink."""
    # The ingestion pipeline asks PyPI for the newest CLI version; there is no network here.
    monkeypatch.setattr("datahub.ingestion.run.pipeline.retrieve_version_stats", lambda **_: None)
    pipeline = Pipeline.create(
        {
            "source": {"type": "file", "config": {"path": str(ESTATE_FILE)}},
            "sink": {
                "type": "datahub-lite",
                "config": {"type": "sqlite", "config": {"file": str(tmp_path / "lite.db")}},
            },
        }
    )
    pipeline.run()
    pipeline.raise_from_status()
    assert pipeline.source.get_report().events_produced == len(json.loads(ESTATE_FILE.read_text()))
    assert LiteCatalog(tmp_path / "lite.db").dataset(dataset_urn("finance.ledger_entries"))
