"""Weights, threshold and synonyms of the similar-asset resolver (set in the action config)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SchemaWeights(_Strict):
    """Signals for controls on a dataset's rows (e.g. uniqueness of a key)."""

    shared_domain: float = 0.2
    #: all the control's fields present with compatible types; scaled by name-match quality
    schema_match: float = 0.3
    #: the matched fields are a key in the candidate, as in the source
    key_match: float = 0.2
    #: the matched fields are not a key there: repeated values may be legitimate
    not_a_key: float = -0.4
    #: a lineage relative within max_lineage_hops; divided by the hop count
    lineage: float = 0.2
    same_platform: float = 0.05
    not_yet_covered: float = 0.05


class OwnershipWeights(_Strict):
    """Signals for ownership controls: risk of being orphaned, not schema."""

    no_active_owner: float = 0.6
    single_active_owner: float = 0.4
    shares_owner: float = 0.2
    shared_domain: float = 0.2
    not_yet_covered: float = 0.05


class SimilarityConfig(_Strict):
    schema_weights: SchemaWeights = SchemaWeights()
    ownership_weights: OwnershipWeights = OwnershipWeights()
    #: a candidate is recommended at or above this score
    threshold: float = 0.5
    #: field name -> other names meaning the same thing (compared normalized)
    synonyms: dict[str, list[str]] = Field(
        default_factory=lambda: {
            "transaction_id": ["txn_id", "transaction_ref", "txn_ref", "payment_transaction_id"]
        }
    )
    max_lineage_hops: int = Field(default=2, ge=0, le=5)
    #: how many candidates to score at most (closest first), keeping resolution bounded
    max_candidates: int = Field(default=200, ge=1)
