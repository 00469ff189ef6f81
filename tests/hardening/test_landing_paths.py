"""Reflex reads exactly the file it was given: DuckDB expands ``*``, ``?`` and ``[`` in paths
and turns ``key=value`` folders into columns, so neither may change what is read (issue 11,
item 9)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from datahub.metadata.schema_classes import (
    AssertionRunEventClass,
    OperationClass,
    PartitionSpecClass,
)

from reflex_actions.backtest.engine import backtest
from reflex_actions.backtest.history import History, load_history
from reflex_actions.config import HistoriesConfig, LandingConfig
from reflex_actions.controls import parse_control_spec
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.history import LANDING_FOLDER, PAYMENTS_INCIDENT
from reflex_actions.demo.run import Demo
from reflex_actions.errors import SnapshotUnreadableError
from reflex_actions.executor import run_control
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.handlers.landing import SnapshotRefused, locate_snapshot, parent_snapshot
from reflex_actions.handlers.lesson_store import lesson_urn_for
from reflex_actions.snapshots import SnapshotFile
from tests.cli.test_control_cli import invoke
from tests.conftest import write_snapshot
from tests.loop.store import history, incidents_b, land, store_of

TXN = UniquenessControl(field="transaction_id")
CLEAN = [{"transaction_id": f"in-{i}"} for i in range(3)]
OUTSIDE_ROWS = [{"transaction_id": "OUTSIDE-SECRET"}] * 4


def _outside(tmp_path: Path, suffix: str) -> Path:
    return write_snapshot(tmp_path / "outside" / f"snapshot{suffix}", OUTSIDE_ROWS)


@pytest.mark.parametrize("folder", ["l*nkdir", "l?nkdir", "l[i]nkdir", "[!x]inkdir"])
def test_a_glob_character_in_a_folder_reads_only_that_folder(
    tmp_path: Path, snapshot_format: str, folder: str
) -> None:
    suffix = f".{snapshot_format}"
    root = tmp_path / "landing"
    inside = write_snapshot(root / folder / f"snapshot{suffix}", CLEAN)
    os.symlink(_outside(tmp_path, suffix).parent, root / "linkdir")

    result = run_control(TXN, inside)

    assert (result.rows_scanned, result.violation_count, result.passed) == (3, 0, True)


def test_a_glob_character_in_a_file_name_reads_only_that_file(tmp_path: Path) -> None:
    write_snapshot(tmp_path / "s1.parquet", OUTSIDE_ROWS)
    exact = write_snapshot(tmp_path / "s[12].parquet", CLEAN)
    assert run_control(TXN, exact).rows_scanned == 3


def test_a_path_duckdb_cannot_match_exactly_is_an_error_not_another_file(tmp_path: Path) -> None:
    """DuckDB's globbing takes a backslash for a separator, so with a glob character beside it
    no pattern names the file: reading it is refused rather than guessed."""
    write_snapshot(tmp_path / "b" / "c1" / "s.parquet", OUTSIDE_ROWS)
    snapshot = write_snapshot(tmp_path / "b\\c[1]" / "s.parquet", CLEAN)
    with pytest.raises(SnapshotUnreadableError, match="not exactly this one"):
        run_control(TXN, snapshot)


def test_key_value_folders_do_not_become_columns(tmp_path: Path, snapshot_format: str) -> None:
    """DuckDB's hive partitioning would read every transaction_id as 'X' from the folder."""
    snapshot = write_snapshot(tmp_path / "transaction_id=X" / f"s.{snapshot_format}", CLEAN)
    assert run_control(TXN, snapshot).violation_count == 0


def test_backtest_reads_each_history_file_as_exactly_that_file(tmp_path: Path) -> None:
    folder = tmp_path / "pay[m]ents*"
    write_snapshot(folder / "2026-09-01.parquet", CLEAN)
    write_snapshot(folder / "2026-09-02.csv", [*CLEAN, CLEAN[0]])
    write_snapshot(folder / "2026-09-0?.parquet", CLEAN[:2])
    write_snapshot(tmp_path / "payments" / "2026-09-01.parquet", OUTSIDE_ROWS)
    (folder / "labels.yaml").write_text("failures: [2026-09-02]\n")

    report = backtest(TXN, [load_history(folder)])

    scanned = {o.snapshot_id: (o.rows_scanned, o.violation_count) for o in report.per_snapshot}
    assert scanned == {"2026-09-01": (3, 0), "2026-09-02": (4, 1), "2026-09-0?": (2, 0)}
    assert (report.true_positives, report.false_positives) == (1, 0)


def test_control_run_cli_reads_exactly_the_snapshot(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("{type: uniqueness, field: transaction_id}")
    write_snapshot(tmp_path / "d1.parquet", OUTSIDE_ROWS)
    exact = write_snapshot(tmp_path / "d*.parquet", CLEAN)
    code, output = invoke("control", "run", spec, "--snapshot", exact)
    assert code == 0, output
    assert "in 3 rows," in output


def _operation(path: str) -> OperationClass:
    return OperationClass(
        timestampMillis=1,
        lastUpdatedTimestamp=1,
        operationType="INSERT",
        customProperties={"snapshot": path},
    )


def test_unusable_landing_paths_are_refused_with_a_bounded_message(tmp_path: Path) -> None:
    landing = LandingConfig(allowed_roots=[tmp_path])
    dataset = "urn:li:dataset:(urn:li:dataPlatform:p,d,PROD)"
    with pytest.raises(SnapshotRefused, match="cannot be resolved"):
        locate_snapshot(_operation(f"{tmp_path}/a\x00b.parquet"), dataset, landing)
    with pytest.raises(SnapshotRefused, match="outside the allowed roots") as refused:
        locate_snapshot(_operation("/elsewhere/" + "x" * 50_000), dataset, landing)
    assert len(str(refused.value)) < 300


def test_a_landing_named_by_path_alone_takes_the_file_s_stem_as_its_snapshot_id(
    tmp_path: Path,
) -> None:
    landing = LandingConfig(allowed_roots=[tmp_path])
    dataset = "urn:li:dataset:(urn:li:dataPlatform:p,d,PROD)"
    path, snapshot_id = locate_snapshot(
        _operation(f"{tmp_path}/d/2026-10-02.parquet"), dataset, landing
    )
    assert (path, snapshot_id) == ((tmp_path / "d" / "2026-10-02.parquet").resolve(), "2026-10-02")


# --- through the running loop ------------------------------------------------------------------

LEDGER_NAME = "finance.ledger_entries"
LEDGER = dataset_urn(LEDGER_NAME)
ASSERTION = assertion_urn(lesson_urn_for(PAYMENTS_INCIDENT), LEDGER)


def test_a_landing_under_a_glob_named_folder_reads_nothing_outside_the_root(
    published: Demo,
) -> None:
    """``l*nkdir`` is a real folder inside the landing root; ``linkdir`` beside it links to a
    folder outside the root whose same-named file holds duplicates."""
    landing = published.workdir / "snapshots" / LANDING_FOLDER / LEDGER_NAME
    rows = [{"transaction_id": f"T{i}", "entry_id": f"E{i}", "amount": i} for i in range(3)]
    inside = write_snapshot(landing / "l*nkdir" / "2026-10-02.parquet", rows)
    secret = [{"transaction_id": "OUTSIDE-SECRET", "entry_id": "X", "amount": 1}] * 4
    outside = write_snapshot(published.workdir / "outside" / "2026-10-02.parquet", secret)
    os.symlink(outside.parent, landing / "linkdir")

    land(published, LEDGER, inside, "glob-folder")
    published.react()

    runs = [
        event
        for _, event in history(store_of(published.workdir), ASSERTION, AssertionRunEventClass)
    ]
    assert [str(run.result.type) if run.result else "" for run in runs] == ["SUCCESS"]
    assert runs[0].result is not None and runs[0].result.rowCount == 3
    assert "OUTSIDE-SECRET" not in repr(runs[0])
    assert incidents_b(store_of(published.workdir), LEDGER) == {}


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{nam}/{snapshot_id}.parquet", "'{nam}' is not a field it fills"),
        ("{name.__class__}/x.parquet", "'{name.__class__}' is not a field it fills"),
        ("{name!r}/x.parquet", "'{name}' is not a field it fills"),
        ("{0}/x.parquet", "'{0}' is not a field it fills"),
        ("{name/x.parquet", "expected '}' before end of string"),
    ],
)
def test_a_template_is_refused_at_load_naming_the_field(template: str, problem: str) -> None:
    """A locator or history folder that would fail at its first event (a typo) or reach into
    an object (``{name.__class__}``) is bad config, said when the config is read."""
    with pytest.raises(ValueError, match=re.escape(problem)):
        LandingConfig(locator=template)
    with pytest.raises(ValueError, match=re.escape("it fills {name}, {platform}, each")):
        HistoriesConfig(folder="{platform}/{snapshot_id}")
    assert LandingConfig(locator="{platform}/{name}/{snapshot_id}.parquet").locator


# --- where a landing is, and the parent it is checked against (issue 28 item 9) ----------------

PARENT = "urn:li:dataset:(urn:li:dataPlatform:s3,shop.ledger,PROD)"
CHILD = "urn:li:dataset:(urn:li:dataPlatform:s3,shop.orders,PROD)"
REFERENCING = parse_control_spec(
    {
        "type": "referential_integrity",
        "field": "transaction_id",
        "references": {"dataset": PARENT, "field": "transaction_id"},
    }
)


def _landed(properties: dict[str, str], partition: str | None = None) -> OperationClass:
    return OperationClass(
        timestampMillis=1,
        lastUpdatedTimestamp=1,
        operationType="INSERT",
        customProperties=properties,
        partitionSpec=PartitionSpecClass(partition=partition) if partition else None,
    )


def _locating(tmp_path: Path) -> LandingConfig:
    return LandingConfig(
        allowed_roots=[tmp_path], locator=f"{tmp_path}/{{name}}/{{snapshot_id}}.csv"
    )


def test_the_locator_finds_a_landing_by_its_snapshot_id(tmp_path: Path) -> None:
    landing = _locating(tmp_path)
    expected = (tmp_path / "shop.orders" / "2026-10-02.csv").resolve()
    by_id = locate_snapshot(_landed({"snapshot_id": "2026-10-02"}), CHILD, landing)
    assert by_id == (expected, "2026-10-02")
    by_partition = locate_snapshot(_landed({}, partition="2026-10-02"), CHILD, landing)
    assert by_partition == (expected, "2026-10-02")
    named = locate_snapshot(
        _landed({"snapshot_id": "2026-10-02"}, partition="2026-10-09"), CHILD, landing
    )
    assert named == (expected, "2026-10-02")  # the id named wins over the partition


def test_a_whole_table_landing_with_no_path_nor_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SnapshotRefused, match="names no snapshot"):
        locate_snapshot(_landed({}, partition="FULL_TABLE_SNAPSHOT"), CHILD, _locating(tmp_path))
    with pytest.raises(SnapshotRefused, match="no landing locator is configured"):
        locate_snapshot(
            _landed({"snapshot_id": "2026-10-02"}), CHILD, LandingConfig(allowed_roots=[tmp_path])
        )


def test_the_locator_refuses_an_urn_that_is_not_a_dataset_s(tmp_path: Path) -> None:
    with pytest.raises(SnapshotRefused, match="is not a dataset urn: no landing locator"):
        locate_snapshot(_landed({"snapshot_id": "x"}), "urn:li:chart:(a,b)", _locating(tmp_path))


def test_a_located_landing_outside_the_allowed_roots_is_refused(tmp_path: Path) -> None:
    landing = LandingConfig(allowed_roots=[tmp_path / "in"], locator=f"{tmp_path}/{{name}}.csv")
    with pytest.raises(SnapshotRefused, match="outside the allowed roots"):
        locate_snapshot(_landed({"snapshot_id": "x"}), CHILD, landing)


def _no_history(dataset: str) -> None:
    raise AssertionError(f"the parent's landing was there: no history of {dataset} is read")


def test_a_control_that_references_nothing_has_no_parent(tmp_path: Path) -> None:
    assert parent_snapshot(TXN, "2026-10-02", _locating(tmp_path), _no_history) is None


def test_the_parent_is_its_landing_with_the_same_snapshot_id(tmp_path: Path) -> None:
    landed = write_snapshot(tmp_path / "shop.ledger" / "2026-10-02.csv", CLEAN)
    parent = parent_snapshot(REFERENCING, "2026-10-02", _locating(tmp_path), _no_history)
    assert parent is not None and parent.chosen == "the same snapshot id"
    assert isinstance(parent.file, SnapshotFile) and parent.file.path == landed.resolve()


def test_without_its_landing_the_parent_is_its_history_s_latest_snapshot_before(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "history"
    earlier = write_snapshot(folder / "2026-10-01.csv", CLEAN)
    write_snapshot(folder / "2026-10-05.csv", CLEAN)
    asked: list[str] = []

    def history_of(dataset: str) -> History:
        asked.append(dataset)
        return load_history(folder, dataset)

    for landing in (_locating(tmp_path), LandingConfig(allowed_roots=[tmp_path])):
        parent = parent_snapshot(REFERENCING, "2026-10-02", landing, history_of)
        assert parent is not None and parent.chosen == "the latest at or before 2026-10-02"
        assert isinstance(parent.file, SnapshotFile) and parent.file.path == earlier
    # a parent landing outside the allowed roots is no parent: its history is
    outside = LandingConfig(
        allowed_roots=[folder], locator=f"{tmp_path}/{{name}}/{{snapshot_id}}.csv"
    )
    write_snapshot(tmp_path / "shop.ledger" / "2026-10-02.csv", CLEAN)
    parent = parent_snapshot(REFERENCING, "2026-10-02", outside, history_of)
    assert parent is not None and parent.file.path == earlier  # type: ignore[union-attr]
    assert asked == [PARENT] * 3


def test_a_parent_with_no_snapshot_at_or_before_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    write_snapshot(folder / "2026-10-05.csv", CLEAN)
    with pytest.raises(SnapshotRefused, match="has no snapshot '2026-10-02' or earlier"):
        parent_snapshot(REFERENCING, "2026-10-02", _locating(tmp_path),
                        lambda dataset: load_history(folder, dataset))  # fmt: skip
    with pytest.raises(SnapshotRefused, match="the dataset this control references"):
        parent_snapshot(REFERENCING, "2026-10-02", _locating(tmp_path), lambda dataset: None)
