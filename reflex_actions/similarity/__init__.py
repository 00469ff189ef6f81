"""Similar-asset resolution: where else can a lesson's failure happen, and why."""

from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.models import (
    Candidate,
    CatalogReader,
    Exclusion,
    Resolution,
    Signal,
    SimilarityQuery,
)
from reflex_actions.similarity.resolver import SimilarityError, resolve_similar_assets

__all__ = [
    "Candidate",
    "CatalogReader",
    "Exclusion",
    "Resolution",
    "Signal",
    "SimilarityConfig",
    "SimilarityError",
    "SimilarityQuery",
    "resolve_similar_assets",
]
