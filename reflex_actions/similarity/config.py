"""Weights, threshold and synonyms of the similar-asset resolver (set in the action config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SchemaWeights(_Strict):
    """Signals for controls on a dataset's rows (e.g. uniqueness of a key)."""

    shared_domain: float = Field(default=0.2, description="Same domain as the source.")
    schema_match: float = Field(
        default=0.3,
        description="All the control's fields present with compatible types; scaled by how "
        "well the names match.",
    )
    key_match: float = Field(
        default=0.2, description="The matched fields are a key in the candidate, as in the source."
    )
    not_a_key: float = Field(
        default=-0.4,
        description="The matched fields are not a key there: repeated values may be legitimate.",
    )
    lineage: float = Field(
        default=0.2,
        description="A lineage relative within max_lineage_hops; divided by the hop count.",
    )
    same_platform: float = Field(default=0.05, description="Same platform as the source.")
    not_yet_covered: float = Field(
        default=0.05, description="No lesson's control covers the candidate yet."
    )


class OwnershipWeights(_Strict):
    """Signals for ownership controls: risk of being orphaned, not schema."""

    no_active_owner: float = Field(default=0.6, description="No active owner left.")
    single_active_owner: float = Field(
        default=0.4, description="One active owner: one departure from orphaned."
    )
    shares_owner: float = Field(
        default=0.2, description="Shares an owner with the orphaned dataset."
    )
    shared_domain: float = Field(default=0.2, description="Same domain as the source.")
    not_yet_covered: float = Field(
        default=0.05, description="No lesson's control covers the candidate yet."
    )


class SimilarityConfig(_Strict):
    schema_weights: SchemaWeights = Field(
        default=SchemaWeights(), description="Signal weights for controls on a dataset's rows."
    )
    ownership_weights: OwnershipWeights = Field(
        default=OwnershipWeights(), description="Signal weights for ownership controls."
    )
    threshold: float = Field(
        default=0.5, description="A candidate is recommended at or above this score."
    )
    synonyms: dict[str, list[str]] = Field(
        default_factory=lambda: {
            "transaction_id": ["txn_id", "transaction_ref", "txn_ref", "payment_transaction_id"]
        },
        description="Field name -> other names meaning the same thing (compared normalized).",
    )
    max_lineage_hops: int = Field(
        default=2, ge=0, le=5, description="How far through lineage a relative counts."
    )
    max_candidates: int = Field(
        default=200,
        ge=1,
        description="How many candidates are scored at most (closest first), keeping "
        "resolution bounded.",
    )
