"""The table-level controls (``volume``, ``freshness``, ``schema_contract``) compile to one
dialect-neutral tree: rendered in every executing and rendering-only dialect it parses back,
quotes names the dialect's way and carries every value as a bound parameter; judged on what
DataHub records, it reads no data; a failing volume or freshness run is judged by one query,
its measures being its sample."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlglot import exp

from reflex_actions.controls.freshness import FreshnessControl
from reflex_actions.controls.schema_contract import SchemaContractControl
from reflex_actions.controls.volume import VolumeControl
from reflex_actions.engines.base import FileTarget
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.errors import ReflexError
from reflex_actions.executor import (
    ControlResult,
    OnRecorded,
    run_control,
    run_control_on_recorded,
    run_controls_on_recorded,
)
from reflex_actions.sql import NO_ROWS, SNAPSHOT, RecordedFacts, Relation
from tests.conformance.control_cases import HOSTILE_NAMES
from tests.conformance.dialect_rendering import (
    RENDERED_DIALECTS,
    RecordingEngine,
    check_every_dialect,
    compiled,
    table_relation,
)
from tests.conftest import write_snapshot


def _reads_snapshot(query: exp.Query) -> bool:
    return any(table.name == SNAPSHOT for table in query.find_all(exp.Table))


# --- volume --------------------------------------------------------------------------------------
def test_volume_counts_render_in_every_dialect_with_the_bounds_bound() -> None:
    control = VolumeControl(min_rows=4_321_987, max_rows=9_876_543, max_drop=0.25)
    relation = replace(table_relation(), earlier_counts=(5_555_551, 5_555_553, 5_555_555))
    query = compiled(control, relation)
    assert (query.sample, query.sample_is_measures) == (None, True)
    lower, upper, median, rule = control.bounds(relation.earlier_counts)
    texts = check_every_dialect(
        control, relation, ["child"], bound_values=[lower, upper, int(median or 0), rule]
    )
    assert set(texts) == set(RENDERED_DIALECTS)
    assert _reads_snapshot(query.counts)


def test_volume_on_a_recorded_count_reads_no_data_in_any_dialect() -> None:
    control = VolumeControl(min_rows=10)
    relation = Relation.of(NO_ROWS, recorded=RecordedFacts(row_count=7_654_321))
    query = compiled(control, relation)
    assert not _reads_snapshot(query.counts)
    check_every_dialect(control, relation, [], bound_values=[7_654_321])


def test_a_failing_volume_run_is_one_query_its_measures_the_sample(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path / "s.parquet", [{"id": i} for i in range(3)])
    engine = RecordingEngine()
    result = run_control(VolumeControl(min_rows=5, max_rows=8), path, engine=engine)
    assert (result.passed, result.rows_scanned, result.violation_count) == (False, 3, 2)
    assert result.sample == [result.measures]
    assert result.sample[0] == {
        "row_count": 3,
        "baseline_median": None,
        "lower_bound": 5,
        "upper_bound": 8,
        "rule": "absolute bounds",
    }
    assert len(engine.fetched) == 1


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_volume_counts_any_table_whatever_its_columns_are_named(tmp_path: Path, name: str) -> None:
    path = write_snapshot(tmp_path / "s.parquet", [{name: i} for i in range(12)])
    result = run_control(VolumeControl(max_rows=10), path)
    assert (result.rows_scanned, result.violation_count) == (12, 2)


# --- freshness -----------------------------------------------------------------------------------
AS_OF_MS = 1_772_366_400_123


@pytest.mark.parametrize("type_", ["TIMESTAMP WITH TIME ZONE", "TIMESTAMP", "DATE", "VARCHAR"])
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_freshness_counts_render_in_every_dialect_for_each_time_type(name: str, type_: str) -> None:
    control = FreshnessControl(max_age="27h", timestamp_field=name, future_tolerance="97m")
    relation = replace(table_relation({name: type_}), as_of_ms=AS_OF_MS)
    query = compiled(control, relation)
    assert (query.sample, query.sample_is_measures) == (None, True)
    check_every_dialect(control, relation, [name], bound_values=[AS_OF_MS, 27 * 3600, 97 * 60])


def test_freshness_on_the_recorded_last_update_binds_it_in_every_dialect() -> None:
    control = FreshnessControl(max_age="2d", future_tolerance="97m")
    recorded = RecordedFacts(last_updated_ms=1_771_111_111_111)
    relation = Relation.of(NO_ROWS, recorded=recorded, as_of_ms=AS_OF_MS)
    check_every_dialect(control, relation, [], bound_values=[1_771_111_111_111, AS_OF_MS, 97 * 60])


# --- schema_contract -----------------------------------------------------------------------------
def _no_describe(query: exp.Query) -> bool:
    """No DuckDB-only construct: DESCRIBE, a list built, bound lists unnested or searched."""
    shown = query.sql(dialect="duckdb").upper()
    return not any(word in shown for word in ("DESCRIBE", "LIST(", "UNNEST", "LIST_CONTAINS"))


@pytest.mark.parametrize("allow_new_columns", [True, False])
def test_schema_contract_renders_in_every_dialect_every_name_and_type_bound(
    allow_new_columns: bool,
) -> None:
    kept, dropped, new = HOSTILE_NAMES[0], HOSTILE_NAMES[2], HOSTILE_NAMES[3]
    control = SchemaContractControl(
        columns={kept: "BIGINT", dropped: "DECIMAL(18,2)"}, allow_new_columns=allow_new_columns
    )
    relation = table_relation({kept: "INTEGER", new: "TIMESTAMP WITH TIME ZONE"})
    query = compiled(control, relation)
    assert query.sample is not None and _no_describe(query.counts) and _no_describe(query.sample)
    assert _reads_snapshot(query.counts)  # rows_scanned counts the snapshot's rows
    check_every_dialect(
        control,
        relation,
        [],
        bound_values=[kept, dropped, new, "DECIMAL(18,2)", "TIMESTAMP WITH TIME ZONE"],
    )


def test_schema_contract_on_the_recorded_schema_renders_and_reads_no_data() -> None:
    hostile_type = "int'); DROP TABLE t; --"
    control = SchemaContractControl(columns={"id": "BIGINT"}, allow_new_columns=False)
    fields = (("id", "int8", "number"), (HOSTILE_NAMES[0], hostile_type, None))
    relation = Relation.of(NO_ROWS, recorded=RecordedFacts(columns=fields))
    query = compiled(control, relation)
    assert not _reads_snapshot(query.counts) and _no_describe(query.counts)
    check_every_dialect(control, relation, [], bound_values=[HOSTILE_NAMES[0], hostile_type])


def test_schema_contract_judges_the_described_types_whatever_the_reader(tmp_path: Path) -> None:
    """The engine's description decides (``relation.types``), not a DESCRIBE of the reader's
    query: a relation described as holding ``amount`` in a decimal breaks a BIGINT contract,
    and the snapshot's rows are still counted."""
    path = write_snapshot(tmp_path / "s.parquet", [{"id": i, "amount": i} for i in range(4)])
    engine = RecordingEngine()
    described = replace(
        engine.relation(FileTarget(path)), types={"id": "BIGINT", "amount": "DECIMAL(9,2)"}
    )
    control = SchemaContractControl(columns={"id": "INTEGER", "amount": "BIGINT"})
    evaluation = engine.evaluate(control, described, 5)
    assert (evaluation.rows_scanned, evaluation.violation_count) == (4, 1)
    assert evaluation.sample == [("amount", "BIGINT", "DECIMAL(9,2)")]
    assert len(engine.fetched) == 2  # the counts, then the sample as they failed


# --- a slice judged on recorded facts ------------------------------------------------------------
def test_a_slice_on_recorded_facts_is_judged_in_one_query_as_each_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sweep's slice: the same control on many tables' recorded facts is one query, each
    table's result what judging it alone gives; another control is its own query; a table
    without the fact it needs has its own error, the others their results."""
    stale_after = FreshnessControl(max_age="2d")
    volume = VolumeControl(min_rows=50, max_drop=0.5)
    day = 24 * 3600 * 1000
    judgements = [
        OnRecorded(stale_after, RecordedFacts(last_updated_ms=AS_OF_MS - n * day), f"t{n}",
                   as_of_ms=AS_OF_MS)
        for n in range(5)
    ] + [
        OnRecorded(stale_after, RecordedFacts(), "never", as_of_ms=AS_OF_MS),
        OnRecorded(volume, RecordedFacts(row_count=40), "small", (100, 90, 110)),
        OnRecorded(volume, RecordedFacts(row_count=99), "normal", (100, 90, 110)),
    ]  # fmt: skip
    alone = []
    for each in judgements:
        try:
            alone.append(
                run_control_on_recorded(each.control, each.recorded, each.snapshot_id,
                                        earlier_counts=each.earlier_counts, as_of_ms=each.as_of_ms)
            )  # fmt: skip
        except ReflexError as error:
            alone.append(error)
    fetched: list[str] = []
    fetch = DuckDBEngine.fetch
    monkeypatch.setattr(
        DuckDBEngine,
        "fetch",
        lambda self, sql, params: fetched.append(sql) or fetch(self, sql, params),
    )
    together = run_controls_on_recorded(judgements)

    assert len(fetched) == 2  # one for the five freshness runs, one for the two volume runs
    assert all("LATERAL" in sql for sql in fetched)
    assert [r.passed for r in together[:5]] == [True, True, True, False, False]  # type: ignore[union-attr]
    assert isinstance(together[5], ReflexError) and "records no update" in str(together[5])
    assert str(together[5]) == str(alone[5])
    for one, other in zip(together, alone, strict=True):
        if isinstance(one, ControlResult):
            assert isinstance(other, ControlResult)
            assert one.model_dump(exclude={"elapsed_ms"}) == other.model_dump(
                exclude={"elapsed_ms"}
            )
    assert (together[6].violation_count, together[7].passed) == (10, True)  # type: ignore[union-attr]
