"""The committed demo snapshots are current, deterministic, and their labels tell the truth.

Backtests score controls against labels.yaml, so a label that disagrees with the data would make
every precision/recall figure of the demo wrong; these tests run the real controls to check it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import yaml

from reflex_actions.controls import Control
from reflex_actions.controls.active_ownership import ActiveOwnershipControl
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.demo import history
from reflex_actions.demo.estate import DATASETS, GROUPS, USERS, dataset_urn
from reflex_actions.errors import SchemaDriftError
from reflex_actions.executor import run_control
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.snapshots import SnapshotFile

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"
OWNERSHIP = SNAPSHOTS / history.OWNERSHIP_FOLDER
HISTORY_FOLDERS = sorted(
    folder.name
    for folder in SNAPSHOTS.iterdir()
    if (folder / history.LABELS_FILE).is_file() and folder.name != history.OWNERSHIP_FOLDER
)
#: histories whose failures are NULLs and negative quantities, not duplicates: their labels are
#: checked against those scenarios' controls in tests/demo/test_sales_histories.py
SALES_HISTORIES = {"sales.orders", "sales.order_lines", "sales.invoices", "sales.returns"}
TRANSACTION_ID_UNIQUE = UniquenessControl(field="transaction_id")
TECHNICAL_OWNERSHIP = ActiveOwnershipControl(min_active_owners=1, owner_types=["TECHNICAL_OWNER"])
DRIFTED = ("finance.ledger_entries", "2026-09-18")


@pytest.fixture(scope="module")
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    yield con
    con.close()


@pytest.fixture(scope="module")
def key_outcomes(connection: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """Each history's primary-key uniqueness outcome per snapshot, computed once."""
    return {
        name: {
            path.stem: outcome(key_control(name), path, connection)
            for path in snapshot_files(SNAPSHOTS / name)
        }
        for name in HISTORY_FOLDERS
    }


def read_labels(folder: Path) -> dict[str, str | None]:
    """labels.yaml's duplicate-row labels (those of no kind or of DUPLICATE_ROWS, what these
    tests check) as snapshot id -> incident urn (None when the label names no incident)."""
    entries = yaml.safe_load((folder / history.LABELS_FILE).read_text(encoding="utf-8"))["failures"]
    return {
        entry["snapshot"] if isinstance(entry, dict) else entry: (
            entry.get("incident") if isinstance(entry, dict) else None
        )
        for entry in entries
        if not isinstance(entry, dict) or entry.get("kind") in (None, DUPLICATE_ROWS)
    }


def snapshot_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.iterdir() if path.suffix in (".parquet", ".csv"))


def outcome(control: Control, path: Path, con: duckdb.DuckDBPyConnection) -> str:
    """'flagged', 'passed' or 'drift' for one control on one snapshot."""
    try:
        result = run_control(control, path, connection=con)
    except SchemaDriftError:
        return "drift"
    return "passed" if result.passed else "flagged"


def expected_outcomes(folder: Path) -> dict[str, str]:
    """Flagged iff labelled; the one drifted snapshot cannot be evaluated."""
    labels = read_labels(folder)
    return {
        path.stem: (
            "drift"
            if (folder.name, path.stem) == DRIFTED
            else "flagged"
            if path.stem in labels
            else "passed"
        )
        for path in snapshot_files(folder)
    }


def key_control(dataset_name: str) -> UniquenessControl:
    return UniquenessControl(fields=DATASETS[dataset_name].key_fields)


def read_table(path: Path) -> Any:
    if path.suffix == ".parquet":
        return pq.read_table(path)
    if path.suffix == ".csv":
        return pa_csv.read_csv(path)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# (a) determinism and currency of the committed data


def test_regenerating_reproduces_the_committed_snapshots(tmp_path: Path) -> None:
    stale = tmp_path / "finance.payments" / "2026-08-31.parquet"
    stale.parent.mkdir()
    stale.write_bytes(b"left over from an earlier run")

    folders = history.generate_histories(tmp_path)

    assert folders == {name: tmp_path / name for name in HISTORY_FOLDERS}
    generated = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*") if path.is_file())
    committed = sorted(
        path.relative_to(SNAPSHOTS)
        for path in SNAPSHOTS.rglob("*")
        if path.is_file() and path.name != "README.md"
    )
    assert generated == committed
    differing = [
        str(relative)
        for relative in generated
        if not _same_content(read_table(tmp_path / relative), read_table(SNAPSHOTS / relative))
    ]
    assert differing == []


def _same_content(left: Any, right: Any) -> bool:
    return left.equals(right) if isinstance(left, pa.Table) else left == right


def test_snapshots_stay_small() -> None:
    total = sum(path.stat().st_size for path in SNAPSHOTS.rglob("*") if path.is_file())
    assert total < 5 * 1024 * 1024


# (b) history labels agree with the uniqueness controls


def test_every_expected_history_is_committed() -> None:
    expected = {
        "finance.payments",
        "finance.ledger_entries",
        "finance.card_settlements",
        "finance.payouts",
        "finance.invoice_lines",
        "finance.refunds",
        "finance.chargebacks",
        "marketing.web_sessions",
        *SALES_HISTORIES,
    }

    assert set(HISTORY_FOLDERS) == expected


@pytest.mark.parametrize("dataset_name", HISTORY_FOLDERS)
def test_key_uniqueness_flags_exactly_the_labelled_snapshots(
    dataset_name: str, key_outcomes: dict[str, dict[str, str]]
) -> None:
    actual = key_outcomes[dataset_name]

    assert len(actual) == 30
    if dataset_name in SALES_HISTORIES:
        assert set(actual.values()) == {"passed"}  # their failures are not duplicates
    else:
        assert actual == expected_outcomes(SNAPSHOTS / dataset_name)


@pytest.mark.parametrize(
    "dataset_name", ["finance.payments", "finance.ledger_entries", "finance.card_settlements"]
)
def test_transaction_id_uniqueness_flags_exactly_the_labelled_snapshots(
    dataset_name: str, connection: duckdb.DuckDBPyConnection
) -> None:
    folder = SNAPSHOTS / dataset_name

    actual = {
        path.stem: outcome(TRANSACTION_ID_UNIQUE, path, connection)
        for path in snapshot_files(folder)
    }

    assert actual == expected_outcomes(folder)
    assert "flagged" in actual.values()


def test_the_labelled_failures_are_the_injected_retries() -> None:
    labels = {name: read_labels(SNAPSHOTS / name) for name in HISTORY_FOLDERS}

    assert labels["finance.payments"] == {
        "2026-09-09": "urn:li:incident:reflex-demo-payments-duplicates",
        "2026-09-22": None,
    }
    assert sorted(labels["finance.ledger_entries"]) == ["2026-09-12", "2026-09-25"]
    assert sorted(labels["finance.card_settlements"]) == ["2026-09-04", "2026-09-16"]
    assert list(labels["finance.payouts"]) == ["2026-09-27"]
    assert list(labels["finance.invoice_lines"]) == ["2026-09-11"]
    for clean in ("finance.refunds", "finance.chargebacks", "marketing.web_sessions"):
        assert labels[clean] == {}


def test_only_the_ledger_snapshot_of_2026_09_18_has_drifted(
    key_outcomes: dict[str, dict[str, str]], connection: duckdb.DuckDBPyConnection
) -> None:
    drifted = [
        (name, snapshot_id)
        for name, outcomes in key_outcomes.items()
        for snapshot_id, result in outcomes.items()
        if result == "drift"
    ]

    assert drifted == [DRIFTED]
    columns = SnapshotFile.from_path(
        SNAPSHOTS / "finance.ledger_entries/2026-09-18.parquet"
    ).columns(connection)
    assert "txn_ref" in columns
    assert "transaction_id" not in columns


@pytest.mark.parametrize("dataset_name", HISTORY_FOLDERS)
def test_duplicates_are_whole_rows_replayed_by_a_later_batch(
    dataset_name: str, connection: duckdb.DuckDBPyConnection
) -> None:
    """A retry repeats rows unchanged, except for the loader's batch number, which is the last."""
    dataset = DATASETS[dataset_name]
    keys = ", ".join(f'"{name}"' for name in dataset.key_fields)
    batch = history.BATCH_COLUMN
    has_batch = batch in [field.name for field in dataset.fields]
    for snapshot_id in read_labels(SNAPSHOTS / dataset_name):
        path = next((SNAPSHOTS / dataset_name).glob(f"{snapshot_id}.*"))
        snapshot = SnapshotFile.from_path(path)
        relation = SimpleNamespace(sql=snapshot.reader_sql(), params={"snapshot": snapshot.pattern})
        exclude = f" EXCLUDE ({batch})" if has_batch else ""
        distinct_rows, distinct_keys = connection.execute(
            f"SELECT (SELECT count(*) FROM (SELECT DISTINCT *{exclude} FROM ({relation.sql}))),"
            f" (SELECT count(DISTINCT ({keys})) FROM ({relation.sql}))",
            relation.params,
        ).fetchall()[0]
        assert distinct_rows == distinct_keys, snapshot_id
        if has_batch:
            replay_batches = connection.execute(
                f"SELECT DISTINCT {batch} FROM (SELECT {batch}, row_number() OVER "
                f"(PARTITION BY {keys} ORDER BY {batch}) AS copy FROM ({relation.sql})) "
                f"WHERE copy > 1",
                relation.params,
            ).fetchall()
            (last_batch,) = connection.execute(
                f"SELECT max({batch}) FROM ({relation.sql})", relation.params
            ).fetchall()[0]
            assert replay_batches == [(last_batch,)], snapshot_id


def test_refunds_repeat_transaction_ids_every_day_without_being_failures(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    """The false-positive trap: uniqueness on refunds.transaction_id would flag normal data."""
    files = snapshot_files(SNAPSHOTS / "finance.refunds")

    assert {outcome(TRANSACTION_ID_UNIQUE, path, connection) for path in files} == {"flagged"}
    assert read_labels(SNAPSHOTS / "finance.refunds") == {}


@pytest.mark.parametrize("dataset_name", ["finance.chargebacks", "marketing.web_sessions"])
def test_distractor_transaction_ids_are_unique(
    dataset_name: str, connection: duckdb.DuckDBPyConnection
) -> None:
    files = snapshot_files(SNAPSHOTS / dataset_name)

    assert {outcome(TRANSACTION_ID_UNIQUE, path, connection) for path in files} == {"passed"}


def test_landing_snapshots_hold_incident_b_only_in_the_ledger(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    landing = SNAPSHOTS / history.LANDING_FOLDER

    actual = {
        path.parent.name: outcome(TRANSACTION_ID_UNIQUE, path, connection)
        for path in sorted(landing.glob("finance.*/2026-10-01.*"))
    }

    assert actual == {
        "finance.card_settlements": "passed",
        "finance.ledger_entries": "flagged",
        "finance.payments": "passed",
        "finance.refunds": "flagged",  # the false-positive trap: partial refunds repeat it
    }
    assert (landing / "finance.card_settlements" / "2026-10-01.csv").is_file()


# (c) ownership labels agree with the active-ownership control


def test_ownership_labels_match_the_active_ownership_control(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    files = snapshot_files(OWNERSHIP)

    flagged = {
        path.stem for path in files if outcome(TECHNICAL_OWNERSHIP, path, connection) == "flagged"
    }

    assert len(files) == 14
    assert read_labels(OWNERSHIP) == {
        "2026-09-21": "urn:li:incident:reflex-demo-orphaned-ownership",
        "2026-09-28": None,
        "2026-10-26": None,
        "2026-11-02": None,
    }
    assert flagged == set(read_labels(OWNERSHIP))


@pytest.mark.parametrize(
    ("snapshot_id", "orphaned"),
    [
        ("2026-09-21", ["finance.card_settlements", "finance.gl_balances", "finance.payments"]),
        ("2026-10-05", []),
        ("2026-11-02", ["finance.daily_revenue", "finance.invoice_lines"]),
    ],
)
def test_leavers_orphan_the_datasets_they_solely_owned(
    snapshot_id: str, orphaned: list[str], connection: duckdb.DuckDBPyConnection
) -> None:
    result = run_control(
        TECHNICAL_OWNERSHIP, OWNERSHIP / f"{snapshot_id}.csv", connection=connection
    )

    assert [row["dataset"] for row in result.sample] == [dataset_urn(name) for name in orphaned]


def test_owners_are_suspended_from_their_leave_date(connection: duckdb.DuckDBPyConnection) -> None:
    for path in snapshot_files(OWNERSHIP):
        week = date.fromisoformat(path.stem)
        rows = connection.execute(
            "SELECT DISTINCT owner_urn, owner_status FROM read_csv($path, all_varchar = true)",
            {"path": str(path)},
        ).fetchall()
        suspended = {owner for owner, status in rows if status == "SUSPENDED"}
        assert {status for _, status in rows} <= {"ACTIVE", "SUSPENDED"}
        assert suspended == {
            user.urn
            for user in USERS.values()
            if not user.is_active_on(week) and user.urn in {owner for owner, _ in rows}
        }, path.stem


def test_every_estate_dataset_is_in_every_ownership_snapshot(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    for path in snapshot_files(OWNERSHIP):
        datasets = {
            row[0]
            for row in connection.execute(
                "SELECT DISTINCT dataset_urn FROM read_csv($path, all_varchar = true)",
                {"path": str(path)},
            ).fetchall()
        }
        assert datasets == {dataset.urn for dataset in DATASETS.values()}, path.stem
        header = path.read_text(encoding="utf-8").splitlines()[0]
        assert header == "dataset_urn,owner_urn,ownership_type,owner_status"


def test_a_dataset_without_owners_is_one_edge_with_empty_owner_fields(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, connection: duckdb.DuckDBPyConnection
) -> None:
    orphan = replace(DATASETS["hr.employees"], name="hr.contractors", owners=())
    monkeypatch.setitem(history.DATASETS, orphan.name, orphan)

    edges = [
        edge
        for edge in history.ownership_edges(date(2026, 8, 3))
        if edge["dataset_urn"] == orphan.urn
    ]
    snapshot = tmp_path / "2026-08-03.csv"
    history.write_snapshot(
        pa.Table.from_pylist(history.ownership_edges(date(2026, 8, 3))), snapshot
    )
    result = run_control(TECHNICAL_OWNERSHIP, snapshot, connection=connection)

    assert edges == [
        {"dataset_urn": orphan.urn, "owner_urn": None, "ownership_type": None, "owner_status": None}
    ]
    assert result.sample == [
        {"dataset": orphan.urn, "active_owners": 0, "owners_of_unknown_status": 0}
    ]


# (d) the snapshots fit the estate


def _snapshot_columns(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        return pq.read_schema(path).names
    return path.read_text(encoding="utf-8").splitlines()[0].split(",")


def _estate_columns(dataset_name: str, snapshot_id: str) -> list[str]:
    """The columns the estate declares, as renamed by the snapshot's schema drift, if any."""
    renamed = history.renamed_columns(dataset_name, date.fromisoformat(snapshot_id))
    return [renamed.get(field.name, field.name) for field in DATASETS[dataset_name].fields]


@pytest.mark.parametrize("dataset_name", HISTORY_FOLDERS)
def test_history_snapshots_have_exactly_the_estate_fields(dataset_name: str) -> None:
    dataset = DATASETS[dataset_name]
    for path in snapshot_files(SNAPSHOTS / dataset_name):
        assert _snapshot_columns(path) == _estate_columns(dataset_name, path.stem), path.name
        if path.suffix == ".parquet":
            types = [field.type for field in pq.read_schema(path)]
            assert types == [history.arrow_type(field.native_type) for field in dataset.fields]


def test_landing_snapshots_have_exactly_the_estate_fields() -> None:
    for path in sorted((SNAPSHOTS / history.LANDING_FOLDER).glob("*/*")):
        assert _snapshot_columns(path) == _estate_columns(path.parent.name, path.stem), path


def test_card_settlements_is_the_csv_history() -> None:
    formats = {
        name: {path.suffix for path in snapshot_files(SNAPSHOTS / name)} for name in HISTORY_FOLDERS
    }

    assert formats.pop("finance.card_settlements") == {".csv"}
    assert all(suffixes == {".parquet"} for suffixes in formats.values())


def test_estate_references_are_consistent() -> None:
    for dataset in DATASETS.values():
        assert dataset.urn == f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{dataset.name},PROD)"
        assert dataset.name.split(".")[0] == dataset.domain
        assert set(dataset.upstreams) <= set(DATASETS)
        assert {owner.user_id for owner in dataset.owners} <= set(USERS)
        assert any(owner.ownership_type == "TECHNICAL_OWNER" for owner in dataset.owners)
    assert {user.group for user in USERS.values()} <= set(GROUPS)
    assert {user.id: user.leaves_on for user in USERS.values() if user.leaves_on} == {
        "bob": date(2026, 9, 15),
        "dave": date(2026, 10, 20),
    }
