"""``control run`` on any target (issue 15, item 4): a PostgreSQL table or one partition of it,
the connection from the environment; the JSON is the one a snapshot file's run prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reflex_actions.cli.main import cli
from tests.conftest import write_snapshot
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server

__all__ = ["postgres_server"]  # the session fixture, used by name below

ROWS = [
    {"order_id": "O1", "day": "2026-09-01"},
    {"order_id": "O2", "day": "2026-09-01"},
    {"order_id": "O3", "day": "2026-09-02"},
    {"order_id": "O3", "day": "2026-09-02"},
]


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "unique.yaml"
    path.write_text("type: uniqueness\nfield: order_id\n")
    return path


@pytest.fixture(scope="module")
def orders(postgres_server: PostgresServer) -> PostgresServer:
    create_table(postgres_server, ("shop", "orders"), ROWS)
    return postgres_server


def run(*arguments: object) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["control", "run", *map(str, arguments), "--json"])
    return result.exit_code, json.loads(result.output)  # bad input too: {"error": ...}


def test_a_table_and_a_partition_on_postgres_print_what_a_file_run_prints(
    orders: PostgresServer, spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFLEX_POSTGRES_URL", orders.url())
    code, on_table = run(spec, "--engine", "postgres", "--table", "reflex.shop.orders")
    assert code == 1
    assert (on_table["violation_count"], on_table["rows_scanned"]) == (1, 4)
    assert on_table["sample"] == [{"key": {"order_id": "O3"}, "occurrences": 2}]
    assert orders.password not in json.dumps(on_table)

    code, clean_day = run(
        spec, "--engine", "postgres", "--table", "shop.orders",
        "--partition-column", "day", "--partition", "2026-09-01",
    )  # fmt: skip
    assert code == 0 and clean_day["rows_scanned"] == 2 and clean_day["snapshot_id"] == "2026-09-01"

    code, on_file = run(spec, "--snapshot", write_snapshot(tmp_path / "orders.parquet", ROWS))
    assert code == 1
    assert on_file.keys() == on_table.keys()
    assert on_file["sample"] == on_table["sample"]


def test_a_target_is_named_once_and_a_partition_needs_its_column(spec: Path) -> None:
    code, out = run(spec)
    assert code == 2 and "give --snapshot FILE, or a table" in out["error"]
    code, out = run(spec, "--snapshot", "a.parquet", "--table", "b")
    assert code == 2 and "give --snapshot FILE, or a table" in out["error"]
    code, out = run(spec, "--snapshot", "a.parquet", "--partition", "2026-09-01")
    assert code == 2 and "--partition-column and --partition go together" in out["error"]


def test_an_unset_connection_variable_is_bad_input_naming_it(
    spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REFLEX_POSTGRES_URL", raising=False)
    code, out = run(spec, "--engine", "postgres", "--table", "shop.orders")
    assert code == 2 and "REFLEX_POSTGRES_URL" in out["error"]


CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.customers,PROD)"


def test_a_table_is_checked_against_the_referenced_dataset_s_table_by_default(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``control compile`` and landing pair them: the parent is the referenced urn's table on
    the same engine (its partition of the same value for a partition); --reference-table
    overrides it."""
    create_table(
        postgres_server, ("shop", "payments"),
        [{"customer_id": c, "day": d} for c, d in (("C1", "d1"), ("C2", "d1"), ("C3", "d2"))],
    )  # fmt: skip
    create_table(
        postgres_server, ("shop", "customers"),
        [{"customer_id": c, "day": "d1"} for c in ("C1", "C3")],
    )  # fmt: skip
    create_table(postgres_server, ("shop", "all_customers"), [{"customer_id": "C2"}])
    spec = tmp_path / "references.yaml"
    spec.write_text(
        "type: referential_integrity\nfield: customer_id\n"
        f"references: {{dataset: '{CUSTOMERS}', field: customer_id}}\n"
    )
    monkeypatch.setenv("REFLEX_POSTGRES_URL", postgres_server.url())
    table = ("--engine", "postgres", "--table", "shop.payments")

    code, live = run(spec, *table)
    assert code == 1 and live["violation_count"] == 1
    assert [row["missing_parent_value"] for row in live["sample"]] == ["C2"]
    assert (live["reference"]["snapshot"], live["reference"]["chosen"]) == (
        "shop.customers", "the live table",
    )  # fmt: skip

    code, day = run(spec, *table, "--partition-column", "day", "--partition", "d2")
    assert code == 1 and [row["missing_parent_value"] for row in day["sample"]] == ["C3"]
    assert day["reference"]["chosen"] == "the same partition"

    code, given = run(spec, *table, "--reference-table", "shop.all_customers")
    assert code == 1 and [row["missing_parent_value"] for row in given["sample"]] == ["C1", "C3"]
    assert given["reference"]["snapshot"] == "shop.all_customers"

    # backtest pairs the partitions the same way: each day of payments against the same day
    # of the referenced dataset's table, or of --reference-table's
    def backtest(*more: str) -> tuple[int, dict]:
        result = CliRunner().invoke(
            cli, ["backtest", str(spec), *table, "--partition-column", "day", *more, "--json"]
        )
        return result.exit_code, json.loads(result.output)

    code, history = backtest()
    assert code == 0, history
    assert [(o["snapshot_id"], o["violation_count"]) for o in history["per_snapshot"]] == [
        ("d1", 1),  # C2 is no d1 customer
        ("d2", 1),  # customers has no d2: an empty partition, as landing judges it
    ]
    assert [o["checked_against"] for o in history["per_snapshot"]] == [
        f"{CUSTOMERS} d1 (the same partition)", f"{CUSTOMERS} d2 (the same partition)",
    ]  # fmt: skip
    create_table(
        postgres_server, ("shop", "customers_by_day"),
        [{"customer_id": c, "day": d} for c, d in (("C1", "d1"), ("C2", "d1"), ("C1", "d2"))],
    )  # fmt: skip
    code, given = backtest("--reference-table", "shop.customers_by_day")
    assert code == 0, given
    assert [o["violation_count"] for o in given["per_snapshot"]] == [0, 1]
    code, refused = backtest("--reference-table", "shop.customers", "--reference-history", ".")
    assert code == 2 and "name two parents" in refused["error"]
