"""The proposal's backtest on lakehouse histories (issue 15, item 6): a dataset on DataHub's
``iceberg`` platform is backtested on its table's snapshots in ``histories.iceberg_catalog``, one
on ``delta-lake`` on the versions of its table under ``histories.delta_root``; each point judged
on the embedded DuckDB engine and labelled by the dataset folder's ``labels.yaml`` (by snapshot
id or version). A table that cannot be read leaves its dataset not evaluable, saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.handlers.proposal import propose
from reflex_actions.lessons.model import LessonState
from tests.catalog.memory_catalog import MemoryCatalog
from tests.engines import lakehouse_tables
from tests.handlers.builders import add_dataset, context, lesson

ON_ICEBERG = "urn:li:dataset:(urn:li:dataPlatform:iceberg,finance.payments,PROD)"
ON_DELTA = "urn:li:dataset:(urn:li:dataPlatform:delta-lake,payments,PROD)"


def labelled(root: Path, name: str, text: str) -> Path:
    """The histories root with the dataset's folder holding only its labels."""
    (root / name).mkdir(parents=True)
    (root / name / "labels.yaml").write_text(text)
    return root


def proposed_on(dataset: str, histories: dict[str, object]) -> str:
    """The proposal report of a duplicate-rows lesson whose source is ``dataset``."""
    catalog = MemoryCatalog()
    add_dataset(catalog, dataset)
    ctx = context(catalog, histories=histories)
    proposal = lesson(
        state=LessonState.CONFIRMED, source_dataset=dataset, affected_assets=[dataset]
    )
    propose(proposal, ctx)
    assert proposal.state is LessonState.PENDING_APPROVAL
    return proposal.report


def test_an_iceberg_dataset_is_backtested_on_its_tables_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = lakehouse_tables.iceberg_history(tmp_path, monkeypatch)
    root = labelled(
        tmp_path / "histories",
        "finance.payments",
        f"failures: [{table.duplicated}, {table.repaired}]\n",
    )

    report = proposed_on(ON_ICEBERG, {"root": root, "iceberg_catalog": table.catalog})

    # snapshots | TP | FP | TN | FN | not evaluable | precision | recall
    assert "| finance.payments | 4 | 1 | 1 | 1 | 1 | 0 | 50% | 50% |" in report
    assert f"| finance.payments | {table.duplicated} | caught (labelled failure) | 1 |" in report
    assert f"| finance.payments | {table.duplicated_again} | flagged, not labelled | 1 |" in report


def test_a_delta_dataset_is_backtested_on_its_tables_versions(tmp_path: Path) -> None:
    lakehouse_tables.delta_history(tmp_path / "lake")  # the table at lake/payments
    root = labelled(tmp_path / "histories", "payments", "failures: [1, 2]\n")

    report = proposed_on(ON_DELTA, {"root": root, "delta_root": tmp_path / "lake"})

    # versions 0 clean, 1 a duplicate (caught), 2 clean but labelled (missed), 3 a duplicate
    # (a false alarm), 4 its key column renamed (not evaluable)
    assert "| payments | 5 | 1 | 1 | 1 | 1 | 1 | 50% | 50% |" in report
    assert "| payments | 3 | flagged, not labelled | 1 |" in report


def test_a_lakehouse_table_that_cannot_be_read_leaves_its_dataset_not_evaluable(
    tmp_path: Path,
) -> None:
    report = proposed_on(ON_DELTA, {"delta_root": tmp_path / "lake"})  # no table there

    assert "| payments | 0 | 0 | 0 | 0 | 0 | 0 |" in report
    (reason,) = [line for line in report.splitlines() if line.startswith("- payments:")]
    assert "not evaluable: its table's history cannot be read" in reason
    assert "cannot read the Delta table at" in reason


def test_a_delta_name_leading_outside_the_root_has_no_history(tmp_path: Path) -> None:
    lakehouse_tables.delta_history(tmp_path)  # a real table at tmp_path/payments
    outside = "urn:li:dataset:(urn:li:dataPlatform:delta-lake,../payments,PROD)"

    report = proposed_on(outside, {"delta_root": tmp_path / "lake"})

    assert "No candidate has a snapshot history to backtest on." in report
