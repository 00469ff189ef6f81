"""The empty-table kind from outside the package opts into the lesson-kind suites it
implements, as a kind in another package would: from ``reflex_actions.testing``, one class per
behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from reflex_actions.backtest import backtest, load_history
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import parse_control_spec
from reflex_actions.executor import run_control
from reflex_actions.lessons.model import IncidentText
from reflex_actions.similarity import SimilarityQuery
from reflex_actions.testing import (
    BaseKindBacktest,
    BaseKindParsing,
    BaseKindRuns,
    BaseKindSignals,
    BaseKindWords,
    ControlCase,
    InMemoryCatalog,
)
from tests.conformance.dialect_rendering import (
    RecordingEngine,
    check_every_dialect,
    table_relation,
)
from tests.conftest import write_snapshot

pytestmark = pytest.mark.usefixtures("plugin_installed")

FINANCE = "urn:li:domain:finance"
ROW_COUNT_MIN = ControlCase(
    type_name="row_count_min",
    columns={"day": "day", "revenue": "revenue"},
    make_spec=lambda c: {"type": "row_count_min", "min_rows": 3},
    passing_rows=[{"day": f"2026-09-0{i}", "revenue": i} for i in range(1, 4)],
    failing_rows=[{"day": "2026-09-01", "revenue": 1}],
    expected_violations=2,
    expected_first_sample={"rows": 1, "min_rows": 3},
    invalid_specs=[
        ({"type": "row_count_min", "min_rows": 0}, "min_rows"),
        ({"type": "row_count_min", "min_rows": True}, "min_rows"),
        ({"type": "row_count_min", "min_rows": "3"}, "min_rows"),
        ({"type": "row_count_min", "min_rows": 10**13}, "min_rows"),
    ],
)


def dataset(
    name: str, upstreams: tuple[str, ...] = (), domain: str | None = FINANCE
) -> DatasetContext:
    return DatasetContext(
        urn=f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{name},PROD)",
        name=name,
        platform="snowflake",
        domain=domain,
        upstreams=tuple(
            f"urn:li:dataset:(urn:li:dataPlatform:snowflake,{u},PROD)" for u in upstreams
        ),
    )


class TestEmptyTableKind(
    BaseKindWords, BaseKindParsing, BaseKindRuns, BaseKindBacktest, BaseKindSignals
):
    kind_pattern = "empty_table"
    incident = IncidentText(
        urn="urn:li:incident:empty",
        title="daily_revenue is empty",
        description="The export failed silently and the table had zero rows on 2026-09-14.",
    )
    control_case = ROW_COUNT_MIN
    renaming: ClassVar[dict[str, str] | None] = None

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        source = dataset("daily_revenue", upstreams=("ledger",))
        catalog = InMemoryCatalog(
            [source, dataset("ledger"), dataset("fx_rates"), dataset("web", domain=None)]
        )
        query = SimilarityQuery(
            pattern=self.kind_pattern, control=self.control(), source_urn=source.urn
        )
        return catalog, query


def test_an_empty_snapshot_is_judged_alike_in_a_backtest_and_a_landing_run(
    tmp_path: Path,
) -> None:
    """A file with no rows gives no group in the backtest's one query over the history; it is
    still evaluated, as the landing run evaluates it."""
    folder = tmp_path / "history"
    write_snapshot(folder / "s1.parquet", [{"a": 1}, {"a": 2}])
    write_snapshot(folder / "s2.parquet", [], columns=["a"])
    (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": ["s2"]}))
    control = parse_control_spec({"type": "row_count_min"})
    report = backtest(control, [load_history(folder)])
    landing = run_control(control, folder / "s2.parquet")
    empty = next(o for o in report.per_snapshot if o.snapshot_id == "s2")
    assert (empty.verdict, empty.violation_count, empty.rows_scanned) == ("true_positive", 1, 0)
    assert (landing.passed, landing.violation_count) == (False, 1)
    assert empty.sample == landing.sample == [{"rows": 0, "min_rows": 1}]
    assert (report.true_positives, report.false_negatives, report.true_negatives) == (1, 0, 1)


def test_counts_and_sample_render_in_every_dialect() -> None:
    """The minimum is a bound value in every dialect, and nothing is DuckDB-only."""
    control = parse_control_spec({"type": "row_count_min", "min_rows": 987654})
    texts = check_every_dialect(control, table_relation(), [], ["987654", "2026-01-01"])
    for dialect, (counts, sample) in texts.items():
        assert "::" not in counts + sample and "LIMIT 5" in sample, (dialect, sample)
    assert control.compile(table_relation()).params == {"min_rows": 987654}


def test_a_passing_check_fetches_only_its_counts(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "s.parquet", [{"a": 1}, {"a": 2}])
    for min_rows, fetches in ((2, 1), (5, 2)):
        engine = RecordingEngine()
        control = parse_control_spec({"type": "row_count_min", "min_rows": min_rows})
        result = run_control(control, path, engine=engine)
        assert len(engine.fetched) == fetches, engine.fetched
    assert (result.violation_count, result.sample) == (3, [{"rows": 2, "min_rows": 5}])
    assert result.measures is None
