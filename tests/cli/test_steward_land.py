"""``steward land``: the ``operation`` ingestion writes when data lands, judged by the pipeline.

The command writes to the embedded store from its own process-level catalog, as a loader
would; the demo's pipeline (the real datahub-actions Pipeline) then handles the event.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    OperationClass,
    OperationTypeClass,
)

from reflex_actions.cli.main import cli
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER
from reflex_actions.demo.run import Demo
from reflex_actions.handlers.assertions import recurrence_incident_urn
from tests.conftest import write_snapshot
from tests.loop.store import history, incidents_b, latest, store_of
from tests.loop.test_landing import ASSERTION, LEDGER, LEDGER_NAME

DUPLICATED = [
    {"transaction_id": "T1", "entry_id": "E1", "amount": 10},
    {"transaction_id": "T1", "entry_id": "E2", "amount": 10},
]


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def land(demo: Demo, *args: str) -> tuple[int, str]:
    return run("steward", "land", *args, "--store", str(store_of(demo.workdir)))


def landing_folder(demo: Demo) -> Path:
    return demo.workdir / "snapshots" / LANDING_FOLDER / LEDGER_NAME


def run_results(demo: Demo) -> list[tuple[str, str]]:
    """(result, run id) of every run of the ledger's duplicate control, oldest first."""
    runs = [e for _, e in history(store_of(demo.workdir), ASSERTION, AssertionRunEventClass)]
    return [(str(e.result.type) if e.result else "", e.runId) for e in runs]


def test_a_landed_snapshot_is_judged_by_the_pipeline(published: Demo) -> None:
    snapshot = write_snapshot(landing_folder(published) / "2026-11-05.parquet", DUPLICATED)
    before = int(time.time() * 1000)

    code, output = land(published, LEDGER, "--snapshot", str(snapshot), "--as", "loader")

    assert code == 0, output
    operation = latest(store_of(published.workdir), LEDGER, OperationClass)
    assert operation is not None
    assert operation.operationType == OperationTypeClass.INSERT
    assert operation.customProperties == {"snapshot": str(snapshot), "snapshot_id": "2026-11-05"}
    assert operation.partitionSpec is None or operation.partitionSpec.partition in (
        None,
        "FULL_TABLE_SNAPSHOT",
    )
    assert operation.actor == "urn:li:corpuser:loader"
    assert before <= operation.timestampMillis == operation.lastUpdatedTimestamp
    assert operation.timestampMillis <= int(time.time() * 1000)

    published.react()
    assert run_results(published) == [("FAILURE", "2026-11-05")]
    raised = incidents_b(store_of(published.workdir), LEDGER)
    assert list(raised) == [recurrence_incident_urn(ASSERTION, "2026-11-05")]


def test_a_relative_snapshot_path_is_written_absolute(
    published: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pipeline runs elsewhere: a path relative to the steward's folder must still name
    the file."""
    write_snapshot(landing_folder(published) / "2026-11-06.parquet", DUPLICATED)
    monkeypatch.chdir(landing_folder(published))

    code, output = land(published, LEDGER, "--snapshot", "2026-11-06.parquet")

    assert code == 0, output
    operation = latest(store_of(published.workdir), LEDGER, OperationClass)
    assert operation is not None and operation.customProperties is not None
    assert operation.customProperties["snapshot"] == str(
        landing_folder(published) / "2026-11-06.parquet"
    )
    published.react()
    assert run_results(published) == [("FAILURE", "2026-11-06")]


def test_a_landed_partition_is_found_by_the_landing_locator(published: Demo) -> None:
    # the demo's ledger landing-day snapshot holds a replayed batch (duplicates)
    day = LANDING_DAY.isoformat()

    code, output = land(published, LEDGER, "--partition", day, "--json")

    assert code == 0, output
    assert json.loads(output)["value"]["partitionSpec"]["partition"] == day
    operation = latest(store_of(published.workdir), LEDGER, OperationClass)
    assert operation is not None and operation.partitionSpec is not None
    assert (operation.partitionSpec.partition, operation.partitionSpec.type) == (day, "PARTITION")
    assert not operation.customProperties
    assert operation.actor == "urn:li:corpuser:datahub"  # ingestion's default user

    published.react()
    assert run_results(published) == [("FAILURE", day)]
    assert list(incidents_b(store_of(published.workdir), LEDGER)) == [
        recurrence_incident_urn(ASSERTION, day)
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([LEDGER], "exactly one of --snapshot FILE or --partition P"),
        ([LEDGER, "--snapshot", "x.parquet", "--partition", "p"], "exactly one of"),
        (["urn:li:corpuser:dave", "--partition", "p"], "not a dataset urn"),
        (["finance.ledger_entries", "--partition", "p"], "not a dataset urn"),
        ([dataset_urn("finance.nowhere"), "--partition", "p"], "no dataset"),
        ([LEDGER, "--snapshot", "/no/such/file.parquet"], "no snapshot file"),
        ([LEDGER, "--snapshot", "/tmp/" + "a" * 5000 + ".parquet"], "cannot be read"),
        ([LEDGER, "--partition", ""], "partition"),
        ([LEDGER, "--partition", "2026\n-10-01"], "partition"),
        ([LEDGER, "--partition", "p" * 5000], "partition"),
    ],
)
def test_bad_input_exits_2_naming_it_and_writes_nothing(
    published: Demo, args: list[str], message: str
) -> None:
    code, output = land(published, *args)

    assert code == 2
    assert message in output
    assert len(output) < 400  # bounded: never the whole hostile value
    assert latest(store_of(published.workdir), LEDGER, OperationClass) is None


def test_a_file_that_is_no_snapshot_format_is_refused(published: Demo, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a snapshot")
    folder = tmp_path / "a-folder.parquet"
    folder.mkdir()

    for path, message in ((notes, "unsupported snapshot format"), (folder, "is a folder")):
        code, output = land(published, LEDGER, "--snapshot", str(path), "--json")
        assert code == 2
        assert message in json.loads(output)["error"]
    assert latest(store_of(published.workdir), LEDGER, OperationClass) is None


def test_a_hostile_dataset_urn_is_named_in_a_bounded_message(published: Demo) -> None:
    hostile = "urn:li:dataset:(" + "A" * 100_000

    code, output = land(published, hostile, "--partition", "p")

    assert code == 2 and "not a dataset urn" in output
    assert len(output) < 400
