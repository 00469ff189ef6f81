"""Words that fit several kinds: the evidence decides, and without evidence the lesson is
`unknown` naming the candidate kinds (DESIGN §7)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from reflex_actions.backtest import load_history
from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.kinds.missing_rows import MISSING_ROWS, MissingRowsKind
from reflex_actions.kinds.missing_values import MissingValuesKind
from reflex_actions.kinds.stale_data import STALE_DATA, StaleDataKind
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts, dated_failures
from reflex_actions.lessons.model import IncidentText
from reflex_actions.patterns import UNKNOWN_PATTERN
from reflex_actions.testing.estate import InMemoryCatalog
from tests.conftest import write_snapshot

# one sentence for duplicates, three for missing values: words alone would pick missing values
TEXT = IncidentText(
    urn="urn:li:incident:both",
    title="The nightly batch was loaded twice.",
    description="Null values showed up in the report. Blank fields everywhere. "
    "Missing values in the totals.",
)
PAYMENTS = DatasetContext(
    urn="urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.payments,PROD)",
    name="finance.payments",
    platform="snowflake",
    fields=(
        FieldInfo(name="transaction_id", native_type="VARCHAR", type="string", is_key=True),
        FieldInfo(name="memo", native_type="VARCHAR", type="string"),
    ),
)


def test_the_words_fit_two_kinds() -> None:
    assert len(MissingValuesKind().words(TEXT)) == 3


def test_the_kind_the_catalog_backs_drafts_the_lesson() -> None:
    """The payments key is declared: a uniqueness control backed by the catalog, while the
    missing-values draft has no field to name."""
    facts = IncidentFacts(source=PAYMENTS, history=None, catalog=InMemoryCatalog([PAYMENTS]))
    draft = DeterministicProposer().draft(TEXT, facts)
    assert draft.failure_pattern == DUPLICATE_ROWS
    assert draft.control == {"type": "uniqueness", "field": "transaction_id"}


def test_without_evidence_the_lesson_is_unknown_and_names_the_candidates() -> None:
    facts = IncidentFacts(source=None, history=None, catalog=InMemoryCatalog([]))
    draft = DeterministicProposer().draft(TEXT, facts)
    assert draft.failure_pattern == UNKNOWN_PATTERN
    assert draft.control is None
    assert "duplicate_rows_non_idempotent_retry" in draft.rationale
    assert "missing_values" in draft.rationale


# "late", "stale" and "missing rows" in one incident: the history decides which broke
LATE_OR_PARTIAL = IncidentText(
    urn="urn:li:incident:late-or-partial",
    title="The orders report was stale on 2026-09-10",
    description="Half the rows were missing from the dashboard, the numbers were out of date.",
)


def _history(tmp_path: Path, stale: bool) -> History:
    """Daily loads 2026-09-01..12; on 09-10 either the rows are two days old or half are gone."""
    folder = tmp_path / ("stale" if stale else "partial")
    for day in range(1, 13):
        broken = day == 10
        loaded = day - 2 if broken and stale else day
        count = 50 if broken and not stale else 100
        rows = [{"id": i, "updated_at": datetime(2026, 9, loaded, 8)} for i in range(count)]
        write_snapshot(folder / f"2026-09-{day:02d}.parquet", rows)
    history = load_history(folder)
    # the incident's date names its failure snapshot, as the resolved-incident handler reads it
    return history.with_failures(dated_failures(history, LATE_OR_PARTIAL), LATE_OR_PARTIAL.urn)


def test_the_history_decides_between_stale_data_and_missing_rows(tmp_path: Path) -> None:
    assert StaleDataKind().words(LATE_OR_PARTIAL) and MissingRowsKind().words(LATE_OR_PARTIAL)
    catalog = InMemoryCatalog([])
    stale = DeterministicProposer().draft(
        LATE_OR_PARTIAL, IncidentFacts(None, _history(tmp_path, stale=True), catalog)
    )
    assert stale.failure_pattern == STALE_DATA
    assert stale.control is not None and stale.control["timestamp_field"] == "updated_at"
    assert any(e.source == "history" and "2026-09-10 lags" in e.quote for e in stale.evidence)
    partial = DeterministicProposer().draft(
        LATE_OR_PARTIAL, IncidentFacts(None, _history(tmp_path, stale=False), catalog)
    )
    assert partial.failure_pattern == MISSING_ROWS
    assert any(e.source == "history" and "2026-09-10 lies" in e.quote for e in partial.evidence)
    unknown = DeterministicProposer().draft(LATE_OR_PARTIAL, IncidentFacts(None, None, catalog))
    assert unknown.failure_pattern == UNKNOWN_PATTERN
    assert "stale_data" in unknown.rationale and "missing_rows" in unknown.rationale


def test_another_kinds_failure_is_a_normal_snapshot_for_the_evidence(tmp_path: Path) -> None:
    """A day labelled as a partial load (kind missing_rows) says nothing against a stale-data
    lesson: its evidence counts it normal, as its backtest does."""
    history = _history(tmp_path, stale=True)
    labels = history.folder / "labels.yaml"
    labels.write_text("failures:\n  - {snapshot: 2026-09-05, kind: missing_rows}\n")
    history = load_history(history.folder)
    history = history.with_failures(dated_failures(history, LATE_OR_PARTIAL), LATE_OR_PARTIAL.urn)
    facts = IncidentFacts(None, history, InMemoryCatalog([]))
    draft = StaleDataKind().draft(LATE_OR_PARTIAL, facts.for_kind(STALE_DATA), [])
    [fact] = [e.quote for e in draft.evidence if e.source == "history"]
    assert "in the 8 normal snapshots learned from" in fact  # ceil(2/3 of 11): 09-05 is one
    assert facts.for_kind(MISSING_ROWS).history.labels.keys() == history.labels.keys()  # type: ignore[union-attr]
