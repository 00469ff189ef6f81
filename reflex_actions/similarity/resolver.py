"""Find where else a lesson's failure can happen, with the reasons for each candidate.

Candidates come only from the catalog's indexed / server-side lookups (same field name or
synonym, same domain, same owners, lineage relatives), never from a scan of the catalog. Each is
scored by the signal set of the lesson's failure pattern; every contribution is named and
explained, and assets ruled out on the way are returned with their reason.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import TYPE_CHECKING

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.errors import ReflexError
from reflex_actions.registry import kind_for_pattern
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.fields import synonyms_of
from reflex_actions.similarity.lineage import lineage_relatives
from reflex_actions.similarity.models import (
    Candidate,
    CatalogReader,
    Excluded,
    Exclusion,
    Resolution,
    Signal,
    SimilarityQuery,
)
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.vocabulary import COVERAGE, display_name

if TYPE_CHECKING:
    from reflex_actions.kinds.base import LessonKind


class SimilarityError(ReflexError):
    """The lesson cannot be resolved (e.g. its source dataset is not in the catalog)."""


def resolve_similar_assets(
    query: SimilarityQuery, catalog: CatalogReader, config: SimilarityConfig | None = None
) -> Resolution:
    """Candidates found and scored by the signal set of the query's lesson kind."""
    config = config or SimilarityConfig()
    kind = kind_for_pattern(query.pattern)
    source = catalog.dataset(query.source_urn)
    if source is None:
        raise SimilarityError(f"source dataset {query.source_urn} is not in the catalog")
    relatives = (
        lineage_relatives(catalog, source.urn, config.max_lineage_hops)
        | kind.related_through(query, source, catalog)
        if kind.follows_lineage()
        else {}
    )
    urns = _retrieve(query, source, catalog, config, list(relatives), kind)
    status_of = cache(catalog.user_status)
    candidates: list[Candidate] = []
    excluded: list[Exclusion] = []
    for urn in urns:
        candidate = catalog.dataset(urn)
        if candidate is None:
            continue
        try:
            covered = _coverage_signal(candidate, query, kind.not_yet_covered_weight(config))
            signals, mapping = kind.signals(
                Weighing(query, source, candidate, relatives.get(urn), status_of, config)
            )
        except Excluded as why:
            excluded.append(Exclusion(urn=urn, name=candidate.name, reason=str(why)))
            continue
        signals.append(covered)
        score = round(sum(s.contribution for s in signals), 4) + 0.0  # never -0.0
        candidates.append(
            Candidate(
                urn=urn,
                name=candidate.name,
                score=score,
                recommended=score >= config.threshold,
                signals=signals,
                field_mapping=mapping,
            )
        )
    candidates.sort(key=lambda c: (-c.score, c.name))
    excluded.sort(key=lambda e: e.name)
    return Resolution(
        source_urn=source.urn,
        pattern=query.pattern,
        threshold=config.threshold,
        candidates=candidates,
        excluded=excluded,
    )


def _retrieve(
    query: SimilarityQuery,
    source: DatasetContext,
    catalog: CatalogReader,
    config: SimilarityConfig,
    relatives: list[str],
    kind: LessonKind,
) -> list[str]:
    """Candidate urns from indexed lookups, those found by the most lookups first (lineage
    relatives count as found), capped at max_candidates: the cap keeps the strongest."""
    evidence: Counter[str] = Counter(relatives)
    lookups: list[list[str]] = []
    for name in query.control.dataset_fields():
        lookups += [
            catalog.datasets_by_field(a) for a in [name, *synonyms_of(name, config.synonyms)]
        ]
    if source.domain:
        lookups.append(catalog.datasets_by_domain(source.domain))
    lookups += kind.candidate_lookups(query, source, catalog)
    for found in lookups:
        evidence.update(set(found))
    evidence.pop(source.urn, None)
    ranked = sorted(evidence, key=lambda urn: (-evidence[urn], urn))
    return ranked[: config.max_candidates]


def _coverage_signal(candidate: DatasetContext, query: SimilarityQuery, weight: float) -> Signal:
    lessons = candidate.structured_properties.get(COVERAGE, ())
    if query.lesson_urn and query.lesson_urn in lessons:
        raise Excluded(f"already covered by this lesson ({display_name(query.lesson_urn)})")
    if lessons:
        others = ", ".join(display_name(str(lesson)) for lesson in lessons)
        return Signal(
            name="coverage", contribution=0.0, reason=f"already covered by other lessons ({others})"
        )
    return Signal(name="coverage", contribution=weight, reason="not yet covered")
