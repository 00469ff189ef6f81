"""Similar-asset resolution: table-driven cases on synthetic estates and on the demo estate."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.models import DatasetContext, FieldInfo, OwnerInfo
from reflex_actions.cli.main import cli
from reflex_actions.controls.active_ownership import ActiveOwnershipControl
from reflex_actions.controls.uniqueness import UniquenessControl
from reflex_actions.demo.estate import dataset_urn
from reflex_actions.demo.metadata import ESTATE_FILE
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.kinds.orphaned_ownership import ORPHANED_OWNERSHIP
from reflex_actions.similarity import (
    Resolution,
    SimilarityConfig,
    SimilarityError,
    SimilarityQuery,
    resolve_similar_assets,
)
from reflex_actions.testing.estate import InMemoryCatalog
from reflex_actions.vocabulary import COVERAGE

LESSON = "urn:li:glossaryTerm:reflex.lessons.dup-payments"
FINANCE = "urn:li:domain:finance"
MARKETING = "urn:li:domain:marketing"


def urn(name: str, platform: str = "snowflake") -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:{platform},{name},PROD)"


def txn(native: str = "VARCHAR", key: bool = True, name: str = "transaction_id") -> FieldInfo:
    kind = "string" if native == "VARCHAR" else "number"
    return FieldInfo(name=name, native_type=native, type=kind, is_key=key)


def ds(name: str, *fields: FieldInfo, **extra: object) -> DatasetContext:
    return DatasetContext(urn=urn(name), name=name, platform="snowflake", fields=fields, **extra)


SOURCE = ds("payments", txn(), domain=FINANCE)
SYNTHETIC = [
    SOURCE,
    ds("ledger", txn(), domain=FINANCE, upstreams=(SOURCE.urn,)),
    ds("settlements", txn(), domain=FINANCE),
    ds("payouts", txn(name="TxnId"), domain=FINANCE),
    ds("chargebacks", txn("BIGINT"), domain=FINANCE),
    ds("refunds", txn(key=False), domain=FINANCE, upstreams=(SOURCE.urn,)),
    ds("fx_rates", FieldInfo(name="currency"), domain=FINANCE),
    ds("sessions", txn(key=False), domain=MARKETING),
    ds("far_mart", txn(), domain=MARKETING, upstreams=(urn("ledger_agg"),)),
    ds("ledger_agg", FieldInfo(name="day"), domain=MARKETING, upstreams=(urn("ledger"),)),
    ds(
        "covered",
        txn(),
        domain=FINANCE,
        structured_properties={COVERAGE: (LESSON,)},
    ),
    ds(
        "covered_elsewhere",
        txn(),
        domain=FINANCE,
        structured_properties={COVERAGE: ("urn:li:glossaryTerm:reflex.lessons.other",)},
    ),
]


def resolve(catalog: InMemoryCatalog, **config: object) -> Resolution:
    query = SimilarityQuery(
        pattern=DUPLICATE_ROWS,
        control=UniquenessControl(field="transaction_id"),
        source_urn=SOURCE.urn,
        lesson_urn=LESSON,
    )
    return resolve_similar_assets(query, catalog, SimilarityConfig(**config))


@pytest.mark.parametrize(
    ("name", "recommended", "reason_fragment"),
    [
        ("ledger", True, "downstream of the source (1 hop)"),
        ("settlements", True, "has transaction_id (VARCHAR, key) like the source"),
        ("payouts", False, "missing field transaction_id"),  # TxnId: no synonym configured here
        ("chargebacks", False, "incompatible type: transaction_id (BIGINT, key) is number"),
        ("refunds", False, "transaction_id is not a key here"),
        ("sessions", False, "transaction_id is not a key here"),
        ("fx_rates", False, "missing field transaction_id"),
        ("covered", False, "already covered by this lesson"),
        ("covered_elsewhere", True, "already covered by other lessons (reflex.lessons.other)"),
        ("far_mart", True, "downstream of the source (3 hops)"),
    ],
)
def test_synthetic_cases(name: str, recommended: bool, reason_fragment: str) -> None:
    resolution = resolve(InMemoryCatalog(SYNTHETIC), synonyms={}, max_lineage_hops=3)
    candidates = {c.name: c for c in resolution.candidates}
    excluded = {e.name: e for e in resolution.excluded}
    if name in candidates:
        candidate = candidates[name]
        assert candidate.recommended is recommended
        assert reason_fragment in candidate.explanation
        assert candidate.score == pytest.approx(sum(s.contribution for s in candidate.signals))
    else:
        assert not recommended
        assert reason_fragment in excluded[name].reason


def test_synonyms_and_normalized_names_map_fields() -> None:
    resolution = resolve(InMemoryCatalog(SYNTHETIC), synonyms={"transaction_id": ["txn_id"]})
    payouts = next(c for c in resolution.candidates if c.name == "payouts")
    assert payouts.field_mapping == {"transaction_id": "TxnId"}
    assert "synonym match for transaction_id" in payouts.explanation
    # a control published there uses the dataset's own field name
    remapped = UniquenessControl(field="transaction_id").with_dataset_fields(payouts.field_mapping)
    assert remapped.key_fields == ["TxnId"]


def test_distant_lineage_relative_beyond_max_hops_gets_no_lineage_signal() -> None:
    resolution = resolve(InMemoryCatalog(SYNTHETIC), max_lineage_hops=1)
    by_name = {c.name: c for c in resolution.candidates}
    far = by_name["far_mart"]
    assert "lineage" not in {s.name for s in far.signals}
    assert "shared_domain" not in {s.name for s in far.signals}
    assert far.score < by_name["ledger"].score


def test_ranking_is_by_score_then_name_and_weights_are_configurable() -> None:
    default = resolve(InMemoryCatalog(SYNTHETIC))
    scores = [c.score for c in default.candidates]
    assert scores == sorted(scores, reverse=True)
    assert default.candidates[0].name == "ledger"
    no_lineage = resolve(InMemoryCatalog(SYNTHETIC), schema_weights={"lineage": 0.0}, threshold=0.8)
    assert {c.name for c in no_lineage.recommended} == {"ledger", "settlements"}
    assert all(
        s.contribution == 0.0
        for c in no_lineage.candidates
        for s in c.signals
        if s.name == "lineage"
    )


def test_retrieval_never_reads_unrelated_datasets() -> None:
    distractors = [
        ds(f"hr_{i}", FieldInfo(name="employee_id"), domain="urn:li:domain:hr") for i in range(500)
    ]
    catalog = InMemoryCatalog([*SYNTHETIC, *distractors])
    resolve(catalog)
    assert not any("hr_" in read for read in catalog.read)


def test_unknown_source_is_a_clear_error() -> None:
    with pytest.raises(SimilarityError, match="not in the catalog"):
        resolve(InMemoryCatalog(SYNTHETIC[1:]))


BOB, CAROL, ERIN = (f"urn:li:corpuser:{n}" for n in ("bob", "carol", "erin"))


def owners(*pairs: tuple[str, str]) -> tuple[OwnerInfo, ...]:
    return tuple(OwnerInfo(owner=o, ownership_type=t) for o, t in pairs)


def test_ownership_pattern_selects_by_risk_not_schema() -> None:
    tech = "TECHNICAL_OWNER"
    source = ds("payments", domain=FINANCE, owners=owners((CAROL, tech)))
    estate = [
        source,
        ds("orphan", domain=MARKETING, owners=owners((BOB, tech))),
        ds("single", domain=FINANCE, owners=owners((ERIN, tech))),
        ds("resilient", domain=FINANCE, owners=owners((ERIN, tech), (CAROL, tech))),
        ds("business_only", domain=FINANCE, owners=owners((CAROL, "BUSINESS_OWNER"))),
        ds("other_domain_single", domain=MARKETING, owners=owners((ERIN, tech))),
    ]
    catalog = InMemoryCatalog(estate, {BOB: "SUSPENDED", CAROL: "ACTIVE", ERIN: "ACTIVE"})
    query = SimilarityQuery(
        pattern=ORPHANED_OWNERSHIP,
        control=ActiveOwnershipControl(owner_types=[tech]),
        source_urn=source.urn,
        departed_users=(BOB,),
    )
    resolution = resolve_similar_assets(query, catalog)
    by_name = {c.name: c for c in resolution.candidates}
    assert "no active TECHNICAL_OWNER now" in by_name["orphan"].explanation
    assert "owned by bob like the source" in by_name["orphan"].explanation
    assert by_name["single"].recommended and "only 1 active" in by_name["single"].explanation
    assert by_name["business_only"].recommended  # shares carol, but no technical owner at all
    assert "other_domain_single" not in by_name  # found by no lookup: no shared domain or owner
    assert {e.name: e.reason for e in resolution.excluded} == {
        "resilient": "2 active TECHNICAL_OWNERs (erin, carol): not at risk"
    }


def test_an_owner_without_a_status_is_unknown_not_departed() -> None:
    """Ingested users often have no corpUserStatus: such an owner is neither counted as gone
    (no "no active owner" claim) nor as active, and the explanation says so."""
    tech = "TECHNICAL_OWNER"
    ingested = "urn:li:corpuser:ingested"
    source = ds("payments", domain=FINANCE, owners=owners((CAROL, tech)))
    estate = [
        source,
        ds("unknown_only", domain=FINANCE, owners=owners((ingested, tech))),
        ds("two_remaining", domain=FINANCE, owners=owners((ingested, tech), (ERIN, tech))),
    ]
    catalog = InMemoryCatalog(estate, {CAROL: "ACTIVE", ERIN: "ACTIVE"})
    query = SimilarityQuery(
        pattern=ORPHANED_OWNERSHIP,
        control=ActiveOwnershipControl(owner_types=[tech]),
        source_urn=source.urn,
    )
    resolution = resolve_similar_assets(query, catalog)
    by_name = {c.name: c for c in resolution.candidates}
    assert "no active" not in by_name["unknown_only"].explanation
    assert "only 1 active TECHNICAL_OWNER (ingested (status unknown))" in (
        by_name["unknown_only"].explanation
    )
    assert {e.name: e.reason for e in resolution.excluded} == {
        "two_remaining": "2 active TECHNICAL_OWNERs (erin, ingested (status unknown)): not at risk"
    }


@pytest.fixture(scope="module")
def demo_catalog(tmp_path_factory: pytest.TempPathFactory) -> LiteCatalog:
    store = tmp_path_factory.mktemp("demo") / "reflex.db"
    assert CliRunner().invoke(cli, ["load", str(ESTATE_FILE), "--store", str(store)]).exit_code == 0
    return LiteCatalog(store)


def test_demo_estate_duplicate_rows(demo_catalog: LiteCatalog) -> None:
    query = SimilarityQuery(
        pattern=DUPLICATE_ROWS,
        control=UniquenessControl(field="transaction_id"),
        source_urn=dataset_urn("finance.payments"),
    )
    resolution = resolve_similar_assets(query, demo_catalog)
    assert {c.name for c in resolution.recommended} == {
        "finance.ledger_entries",
        "finance.card_settlements",
        "finance.payouts",
    }
    near_misses = {c.name for c in resolution.candidates if not c.recommended}
    assert {"finance.refunds", "marketing.web_sessions"} <= near_misses
    reasons = {e.name: e.reason for e in resolution.excluded}
    assert reasons["finance.chargebacks"].startswith("incompatible type")
    assert reasons["finance.invoice_lines"] == "missing field transaction_id"


def test_demo_estate_orphaned_ownership(demo_catalog: LiteCatalog, tmp_path: Path) -> None:
    query = SimilarityQuery(
        pattern=ORPHANED_OWNERSHIP,
        control=ActiveOwnershipControl(owner_types=["TECHNICAL_OWNER"]),
        source_urn=dataset_urn("finance.payments"),
        departed_users=("urn:li:corpuser:bob",),
    )
    resolution = resolve_similar_assets(query, demo_catalog)
    recommended = {c.name for c in resolution.recommended}
    # dave is the only technical owner of these: they are exactly what his departure orphans
    assert {"finance.invoice_lines", "finance.daily_revenue"} <= recommended
    assert all(e.reason.endswith("not at risk") for e in resolution.excluded)


def test_the_candidate_cap_keeps_the_best_supported() -> None:
    """Past max_candidates, datasets found by more lookups (field and domain) are kept first."""
    weak = [ds(f"a_mart_{i}", txn(), domain=MARKETING) for i in range(20)]
    strong = ds("z_settlements", txn(), domain=FINANCE)
    catalog = InMemoryCatalog([SOURCE, *weak, strong])
    resolution = resolve(catalog, max_candidates=3, max_lineage_hops=0)
    assert "z_settlements" in {c.name for c in resolution.candidates}
