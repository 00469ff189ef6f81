"""Words that fit several kinds: the evidence decides, and without evidence the lesson is
`unknown` naming the candidate kinds (DESIGN §7)."""

from __future__ import annotations

from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.kinds.missing_values import MissingValuesKind
from reflex_actions.lessons.deterministic import DeterministicProposer
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import IncidentText
from reflex_actions.patterns import UNKNOWN_PATTERN
from tests.similarity.estate import InMemoryCatalog

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
