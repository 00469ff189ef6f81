"""The conformance suite every lesson kind passes, one class per behaviour (dbt-adapters
style): a kind's test module subclasses those it implements as ``Test<Kind>`` and gives its
cases (:class:`KindCase`): an incident its words recognise, a control case (rows under plain and
hostile column names), a field renaming, and a small estate for its signals."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from reflex_actions.backtest import backtest, load_history
from reflex_actions.controls import (
    dump_control_line,
    dump_control_yaml,
    known_controls,
    parse_control_spec,
    parse_control_yaml,
)
from reflex_actions.errors import (
    ControlSpecError,
    SchemaDriftError,
    SnapshotNotFoundError,
    SnapshotUnreadableError,
)
from reflex_actions.executor import ControlResult, ReferenceSnapshot, run_control
from reflex_actions.kinds.base import LessonKind
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText
from reflex_actions.registry import kind_for_pattern
from reflex_actions.similarity import SimilarityQuery, resolve_similar_assets
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.sql import Relation, shown_sql
from reflex_actions.testing.cases import ControlCase, hostile_names, rows_as, write_snapshot
from reflex_actions.testing.estate import InMemoryCatalog

#: Each run test, on a Parquet and on a CSV snapshot.
SNAPSHOT_FORMATS = pytest.mark.parametrize("snapshot_format", ["parquet", "csv"])


class KindCase:
    """What a kind's suite needs: its pattern and cases, and how to run its control."""

    kind_pattern: ClassVar[str]
    #: an incident this kind's words recognise (and no other kind's words outweigh)
    incident: ClassVar[IncidentText]
    control_case: ClassVar[ControlCase]
    #: a renaming its control applies (source field -> dataset field); None: it cannot rename
    renaming: ClassVar[dict[str, str] | None]

    def estate(self) -> tuple[InMemoryCatalog, SimilarityQuery]:
        """A small estate and the query of a lesson of this kind on its source."""
        raise NotImplementedError

    def kind(self) -> LessonKind:
        return kind_for_pattern(self.kind_pattern)

    def control(self, names: dict[str, str] | None = None) -> Any:
        case = self.control_case
        return parse_control_spec(case.make_spec(names or case.columns))

    def run(self, control: Any, path: Path, names: dict[str, str] | None = None) -> ControlResult:
        """Run on one snapshot; a control checked against another dataset gets that dataset's
        snapshot (the case's reference rows, in the same format) beside it."""
        reference = None
        if control.referenced() is not None:
            rows = rows_as(self.control_case.reference_rows, names or self.control_case.columns)
            parent = write_snapshot(path.with_name(f"parent-of-{path.stem}{path.suffix}"), rows)
            reference = ReferenceSnapshot(SnapshotFile.from_path(parent), "given")
        return run_control(control, path, reference=reference, as_of_ms=self.control_case.as_of_ms)


def kind_suites(base: type = KindCase) -> list[type[KindCase]]:
    """Every test class below ``base`` that names its kind: the kinds this test run tests,
    each once, whichever of the suites it opts into."""
    found: list[type[KindCase]] = []
    for sub in base.__subclasses__():
        names_its_case = hasattr(sub, "kind_pattern") and hasattr(sub, "control_case")
        if names_its_case and sub.__module__ != __name__ and sub not in found:
            found.append(sub)
        found += [c for c in kind_suites(sub) if c not in found]
    return found


class BaseKindWords(KindCase):
    """It is registered with its control, and its words draft its incidents, no one else's."""

    def test_it_is_registered_with_its_control(self) -> None:
        kind = self.kind()
        assert kind.pattern == self.kind_pattern and kind.title
        assert self.control_case.type_name in kind.control_types()
        assert all(t in known_controls() for t in kind.control_types())

    def test_its_words_draft_its_incident_with_verbatim_evidence(self) -> None:
        facts = IncidentFacts(source=None, history=None, catalog=InMemoryCatalog([]))
        draft = DeterministicProposer().draft(self.incident, facts)
        assert draft.failure_pattern == self.kind_pattern
        fields = self.incident.fields()
        quoted = [e for e in draft.evidence if e.source in fields]
        assert quoted and all(e.quote in fields[e.source] for e in quoted)

    def test_other_kinds_incidents_do_not_draft_it(self) -> None:
        facts = IncidentFacts(source=None, history=None, catalog=InMemoryCatalog([]))
        for other in kind_suites(BaseKindWords):
            if other.kind_pattern != self.kind_pattern:
                draft = DeterministicProposer().draft(other.incident, facts)
                assert draft.failure_pattern != self.kind_pattern, other.__name__

    def test_the_llm_shape_is_its_control_models(self) -> None:
        shape = self.kind().llm_shape()
        assert shape["failure_pattern"] == self.kind_pattern
        assert shape["controls"] == {
            t: known_controls()[t].model_json_schema() for t in self.kind().control_types()
        }


class BaseKindParsing(KindCase):
    """Its control parses strictly, round-trips, and compiles with every name quoted and every
    value bound."""

    def test_parses_strictly_and_round_trips(self) -> None:
        control = self.control()
        assert isinstance(control, known_controls()[self.control_case.type_name])
        assert parse_control_yaml(dump_control_yaml(control)) == control
        assert parse_control_yaml(dump_control_line(control)) == control
        spec = {**self.control_case.make_spec(self.control_case.columns), "severity": "high"}
        with pytest.raises(ControlSpecError, match="unknown key 'severity'"):
            parse_control_spec(spec)

    def test_rejects_bad_specs_naming_the_problem(self) -> None:
        for spec, fragment in self.control_case.invalid_specs:
            with pytest.raises(ControlSpecError) as raised:
                parse_control_spec(spec)
            assert fragment in str(raised.value), (spec, str(raised.value))

    def test_compiles_with_quoted_identifiers_and_bound_values(self) -> None:
        names = hostile_names(self.control_case)
        control = self.control(names)
        relation = Relation.of(
            "SELECT * FROM read_parquet($snapshot)",
            params={"snapshot": "x"},
            reference=Relation.of("SELECT * FROM read_parquet($parent)", params={"parent": "y"}),
        )
        first, second = control.compile(relation), control.compile(relation)
        assert shown_sql(first, relation) == shown_sql(second, relation)
        for name in control.required_columns():
            assert name in names.values()
            assert '"' + name.replace('"', '""') + '"' in shown_sql(first, relation)
        for value in self.control_case.bound_values:
            assert value not in shown_sql(first, relation)


class BaseKindRuns(KindCase):
    """Its control runs on snapshots: passes, fails with the exact count and sample, names a
    drifted column, and says when a snapshot is missing or unreadable."""

    @SNAPSHOT_FORMATS
    def test_passes_on_a_clean_snapshot(self, tmp_path: Path, snapshot_format: str) -> None:
        case = self.control_case
        path = write_snapshot(
            tmp_path / f"clean.{snapshot_format}", rows_as(case.passing_rows, case.columns)
        )
        result = self.run(self.control(), path)
        assert (result.passed, result.violation_count, result.sample) == (True, 0, [])
        assert result.rows_scanned == len(case.passing_rows)
        assert result.snapshot_id == "clean"

    @SNAPSHOT_FORMATS
    @pytest.mark.parametrize("naming", ["plain", "hostile"])
    def test_fails_on_a_bad_snapshot_with_exact_count_and_sample(
        self, tmp_path: Path, snapshot_format: str, naming: str
    ) -> None:
        case = self.control_case
        names = case.columns if naming == "plain" else hostile_names(case)
        path = write_snapshot(
            tmp_path / f"bad.{snapshot_format}", rows_as(case.failing_rows, names)
        )
        result = self.run(self.control(names), path, names)
        assert not result.passed
        assert result.violation_count == case.expected_violations
        assert result.rows_scanned == len(case.failing_rows)
        for key, value in case.expected_first_sample.items():
            assert result.sample[0][key] == value
        assert len(result.sample) <= 5

    @SNAPSHOT_FORMATS
    def test_schema_drift_names_the_missing_column(
        self, tmp_path: Path, snapshot_format: str
    ) -> None:
        case = self.control_case
        control = self.control()
        if not control.required_columns():  # e.g. a row count: no snapshot can drift from it
            path = write_snapshot(tmp_path / f"other.{snapshot_format}", [{"unrelated": 1}] * 3)
            assert self.run(control, path).rows_scanned == 3
            return
        dropped = case.columns[next(iter(case.columns))]
        rows = [
            {k: v for k, v in row.items() if k != dropped}
            for row in rows_as(case.passing_rows, case.columns)
        ]
        path = write_snapshot(tmp_path / f"drifted.{snapshot_format}", rows)
        with pytest.raises(SchemaDriftError) as raised:
            self.run(control, path)
        assert raised.value.missing == [dropped]
        assert repr(dropped) in str(raised.value)

    def test_missing_and_unreadable_snapshots_are_clear_errors(self, tmp_path: Path) -> None:
        control = self.control()
        with pytest.raises(SnapshotNotFoundError, match="not found"):
            self.run(control, tmp_path / "absent.parquet")
        corrupt = tmp_path / "corrupt.parquet"
        corrupt.write_bytes(b"PAR1 this is not parquet")
        with pytest.raises(SnapshotUnreadableError, match=r"corrupt\.parquet"):
            self.run(control, corrupt)

    def test_with_dataset_fields_renames_or_says_it_cannot(self) -> None:
        control = self.control()
        if self.renaming is None:
            with pytest.raises(ControlSpecError, match="cannot rename"):
                control.with_dataset_fields({"a": "b"})
            return
        renamed = control.with_dataset_fields(self.renaming)
        fields = set(renamed.dataset_fields())
        assert set(self.renaming.values()) <= fields
        assert not set(self.renaming) & fields
        assert control.with_dataset_fields({}) == control


class BaseKindBacktest(KindCase):
    """Its control's backtest of a labelled history is exact."""

    def test_the_backtest_of_a_labelled_history_is_exact(self, tmp_path: Path) -> None:
        case = self.control_case
        folder = tmp_path / "history"
        folder.mkdir()
        for snapshot, rows in (
            ("2026-01-01", case.passing_rows),
            ("2026-01-02", case.failing_rows),
            ("2026-01-03", case.passing_rows),
            ("2026-01-04", case.failing_rows),
        ):
            write_snapshot(folder / f"{snapshot}.parquet", rows_as(rows, case.columns))
        (folder / "labels.yaml").write_text(yaml.safe_dump({"failures": ["2026-01-02"]}))
        control, references = self.control(), {}
        if (target := control.referenced()) is not None:  # one parent snapshot, before them all
            parent = tmp_path / "parent"
            parent.mkdir()
            write_snapshot(
                parent / "2026-01-01.parquet", rows_as(case.reference_rows, case.columns)
            )
            references = {target.dataset: load_history(parent)}
        report = backtest(control, [load_history(folder)], references=references)
        counts = (
            report.true_positives,
            report.false_positives,
            report.true_negatives,
            report.false_negatives,
        )
        assert counts == (1, 1, 2, 0)
        assert (report.precision, report.recall) == (0.5, 1.0)


class BaseKindSignals(KindCase):
    """Its similar-asset signals explain every candidate and exclusion."""

    def test_its_signals_explain_every_candidate(self) -> None:
        catalog, query = self.estate()
        resolution = resolve_similar_assets(query, catalog)
        assert resolution.candidates, "the estate should give at least one candidate"
        for candidate in resolution.candidates:
            assert candidate.explanation.strip(), candidate.urn
            assert all(signal.reason.strip() for signal in candidate.signals)
        assert all(exclusion.reason.strip() for exclusion in resolution.excluded)


class BaseLessonKindConformance(
    BaseKindWords, BaseKindParsing, BaseKindRuns, BaseKindBacktest, BaseKindSignals
):
    """What every lesson kind gets right: all of the above."""
