"""One candidate dataset as a kind weighs it for a query (``LessonKind.signals``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.lineage import Relation
from reflex_actions.similarity.models import SimilarityQuery


@dataclass(frozen=True)
class Weighing:
    """What a kind weighs about one candidate: the query and its source, the candidate, how
    lineage relates them (None: it does not), a user's status (active, suspended...), and the
    similarity settings."""

    query: SimilarityQuery
    source: DatasetContext
    candidate: DatasetContext
    relation: Relation | None
    status_of: Callable[[str], str | None]
    config: SimilarityConfig
