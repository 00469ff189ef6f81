"""The conformance suite every executing engine passes (DESIGN §8), dbt-adapters style.

An engine's test module subclasses :class:`BaseEngineConformance` as ``Test<Engine>Conformance``
and gives its ``engine`` fixture and ``load_table``. Every registered kind's control case then
runs on it, its passing and its failing rows under plain and hostile column names (a referencing
control's parent loaded beside them), and must give what DuckDB gives on the same rows written
as Parquet: rows scanned, violations, pass or fail, the sample and the measures.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.conformance
import tests.kinds
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.engines.base import Engine, EngineError, TableTarget, Target
from reflex_actions.errors import SchemaDriftError, SnapshotNotFoundError
from reflex_actions.executor import ControlResult, ReferenceSnapshot, run_control
from reflex_actions.registry import registered_kinds
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.testing.cases import hostile_names, rows_as
from reflex_actions.testing.kind_suite import kind_suites
from tests.conformance.control_cases import HOSTILE_NAMES, ControlCase
from tests.conftest import write_snapshot


def kind_control_cases() -> list[ControlCase]:
    """The control case of every registered kind's control that reads a table's rows (from
    the kinds' conformance modules), by control type."""
    for package in (tests.conformance, tests.kinds):
        for module in pkgutil.iter_modules(package.__path__):
            if module.name.startswith("test_"):
                importlib.import_module(f"{package.__name__}.{module.name}")
    registered = {kind.pattern for kind in registered_kinds()}
    cases = {
        suite.control_case.type_name: suite.control_case
        for suite in kind_suites()
        if suite.kind_pattern in registered
    }
    return [
        case
        for _, case in sorted(cases.items())
        if parse_control_spec(case.make_spec(case.columns)).reads_data()
    ]


CASES = kind_control_cases()
#: The credential an unreachable engine is opened with: no error may show it.
SECRET = "conformance-secret-9f2c"


class BaseEngineConformance:
    """What every executing engine gets right; subclass it once per engine."""

    @pytest.fixture
    def engine(self) -> Iterator[Engine]:
        """The engine under test (closed after the test)."""
        raise NotImplementedError

    def load_table(self, name: str, rows: list[dict[str, Any]], columns: list[str]) -> Target:
        """Load ``rows`` (columns ``columns``, in order) as a table called ``name`` and return
        the target the engine reads it by; the column types are those a Parquet file of the
        same rows has."""
        raise NotImplementedError

    def missing_table(self) -> TableTarget:
        """A table the engine's catalog does not hold."""
        return TableTarget("reflex_conformance_absent")

    def unreachable_engine(self) -> None:
        """Open the engine on a server nobody listens on, with ``SECRET`` as its credential:
        it must raise EngineError. Engines with no server override this to say so."""
        raise NotImplementedError

    def test_a_missing_table_is_not_found_naming_it(self, engine: Engine) -> None:
        missing = self.missing_table()
        with pytest.raises(SnapshotNotFoundError) as raised:
            engine.relation(missing)
        assert missing.name.rsplit(".", 1)[-1] in str(raised.value)

    def test_a_missing_column_is_schema_drift_naming_it_and_what_there_is(
        self, engine: Engine
    ) -> None:
        rows = [{"transaction_id": "t1", "amount": 1.5}]
        target = self.load_table("drifted", rows, ["transaction_id", "amount"])
        assert isinstance(target, TableTarget)
        with pytest.raises(SchemaDriftError) as drifted:
            engine.relation(target, ["transaction_id", "payment_id"])
        assert drifted.value.missing == ["payment_id"]
        assert drifted.value.available == ["transaction_id", "amount"]
        partitioned = TableTarget(target.name, "load_date", "2026-09-01")
        with pytest.raises(SchemaDriftError) as no_partition:
            engine.relation(partitioned)
        assert no_partition.value.missing == ["load_date"]

    def test_an_unreachable_server_is_one_engine_error_without_the_credential(self) -> None:
        with pytest.raises(EngineError) as raised:
            self.unreachable_engine()
        message = str(raised.value)
        assert SECRET not in message and "\n" not in message

    @pytest.mark.parametrize("naming", ["plain", "hostile"])
    @pytest.mark.parametrize("rows_of", ["passing", "failing"])
    @pytest.mark.parametrize("case", CASES, ids=[case.type_name for case in CASES])
    def test_gives_what_duckdb_gives_on_parquet(
        self, engine: Engine, tmp_path: Path, case: ControlCase, rows_of: str, naming: str
    ) -> None:
        names = case.columns if naming == "plain" else hostile_names(case)
        rows = rows_as(case.passing_rows if rows_of == "passing" else case.failing_rows, names)
        columns = list(rows[0])
        control = parse_control_spec(case.make_spec(names))
        parent = rows_as(case.reference_rows, names) if control.referenced() else None

        expected = self._on_parquet(control, case, tmp_path, rows, columns, parent)
        if rows_of == "failing":  # the reference result is the case's own
            assert (expected.passed, expected.violation_count) == (False, case.expected_violations)
        table = f"{case.type_name} {rows_of}" + (
            ' x"); DROP TABLE t; --' if naming != "plain" else ""
        )
        reference = None
        if parent is not None:
            reference = ReferenceSnapshot(
                self.load_table(f"{table} parent", parent, list(parent[0])), "given"
            )
        actual = run_control(
            control,
            self.load_table(table, rows, columns),
            engine=engine,
            reference=reference,
            as_of_ms=case.as_of_ms,
        )
        assert _judged(actual) == _judged(expected)

    @pytest.mark.parametrize("naming", ["plain", "hostile"])
    def test_a_not_null_sample_with_no_key_column_shows_the_rows_as_duckdb_does(
        self, engine: Engine, tmp_path: Path, naming: str
    ) -> None:
        """Keyed by its NULL field alone, a ``not_null`` sample shows its rows by the table's
        other columns, picked by their types as the engine describes them and named by bound
        values: the same columns and rows as DuckDB on Parquet."""
        names = ["parcel_id", "weight", "shipment_id", "line"]
        if naming == "hostile":
            names = [f"{HOSTILE_NAMES[n % len(HOSTILE_NAMES)]}#{n}" for n in range(len(names))]
        values = [(None if n % 2 else f"p{n}", 1.5 + n, f"s{9 - n}", n) for n in range(6)]
        rows = [dict(zip(names, row, strict=True)) for row in values]
        control = parse_control_spec({"type": "not_null", "field": names[0]})
        expected = run_control(control, write_snapshot(tmp_path / "s.parquet", rows, names))
        actual = run_control(
            control, self.load_table(f"parcels {naming}", rows, names), engine=engine
        )
        assert [row["row"] for row in expected.sample] == [
            {names[2]: f"s{9 - n}", names[3]: n} for n in (5, 3, 1)
        ]
        assert _judged(actual) == _judged(expected)

    @pytest.mark.parametrize(
        ("spec", "violations", "shown"),
        [
            ({"type": "value_range", "max": 3}, 1, ["nan"]),  # a NaN is above every number...
            ({"type": "value_range", "min": 5}, 2, ["1.0", "3.0"]),  # ... so below no minimum
            ({"type": "accepted_values", "values": [1, 3]}, 1, ["nan"]),
        ],
        ids=["max", "min", "accepted"],
    )
    def test_a_nan_in_a_double_column_is_judged_as_duckdb_judges_it_on_parquet(
        self,
        engine: Engine,
        tmp_path: Path,
        spec: dict[str, Any],
        violations: int,
        shown: list[str],
    ) -> None:
        """A DOUBLE column's NaN, left out of a Parquet file's statistics (min 1, max 3),
        counts as on DuckDB, whether the engine compares the column natively or by its text
        (each engine spells its numbers' text its own way: the sample is read as numbers)."""
        rows = [{"amount": amount} for amount in [1.0, float("nan"), 3.0, None]]
        control = parse_control_spec({**spec, "field": "amount"})
        expected = run_control(control, write_snapshot(tmp_path / "doubles.parquet", rows))
        actual = run_control(control, self.load_table("doubles", rows, ["amount"]), engine=engine)
        for result in (expected, actual):
            assert (result.rows_scanned, result.violation_count) == (4, violations)
            assert [repr(float(row["value"])) for row in result.sample] == shown

    @staticmethod
    def _on_parquet(
        control: Control,
        case: ControlCase,
        folder: Path,
        rows: list[dict[str, Any]],
        columns: list[str],
        parent: list[dict[str, Any]] | None,
    ) -> ControlResult:
        """The reference result: DuckDB on the rows written as Parquet."""
        reference = None
        if parent is not None:
            written = write_snapshot(folder / "parent.parquet", parent)
            reference = ReferenceSnapshot(SnapshotFile.from_path(written), "given")
        path = write_snapshot(folder / "snapshot.parquet", rows, columns)
        return run_control(control, path, reference=reference, as_of_ms=case.as_of_ms)


def _judged(result: ControlResult) -> dict[str, Any]:
    """What two engines must agree on (not where the rows were read, nor how long it took)."""
    return result.model_dump(
        include={"rows_scanned", "violation_count", "passed", "sample", "measures"}
    )
