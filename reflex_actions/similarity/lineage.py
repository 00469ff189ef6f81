"""Lineage relatives of the source within a few hops, and why each is related."""

from __future__ import annotations

from dataclasses import dataclass

from reflex_actions.similarity.models import CatalogReader
from reflex_actions.vocabulary import display_name
from reflex_actions.wording import plural


@dataclass(frozen=True)
class Relation:
    hops: int
    #: e.g. "downstream of the source", "shares upstream finance.payments"
    description: str


def lineage_relatives(
    catalog: CatalogReader, source_urn: str, max_hops: int
) -> dict[str, Relation]:
    """Datasets up- or downstream of the source within ``max_hops``, and siblings sharing a
    direct upstream with it (one hop via that upstream, counted as two)."""
    relatives: dict[str, Relation] = {}
    source = catalog.dataset(source_urn)
    for direction in ("downstream", "upstream"):
        frontier = [source_urn]
        for hops in range(1, max_hops + 1):
            next_frontier: list[str] = []
            for urn in frontier:
                if direction == "downstream":
                    neighbours = catalog.downstreams(urn)
                else:
                    context = source if urn == source_urn else catalog.dataset(urn)
                    neighbours = list(context.upstreams) if context else []
                for neighbour in neighbours:
                    if neighbour != source_urn and neighbour not in relatives:
                        relatives[neighbour] = Relation(
                            hops, f"{direction} of the source ({plural(hops, 'hop')})"
                        )
                        next_frontier.append(neighbour)
            frontier = next_frontier
    if source is not None and max_hops >= 2:
        for upstream in source.upstreams:
            for sibling in catalog.downstreams(upstream):
                if sibling != source_urn and sibling not in relatives:
                    relatives[sibling] = Relation(
                        2, f"shares upstream {display_name(upstream)} with the source"
                    )
    return relatives
