"""An in-memory catalog reader for similarity and kind tests: lookups answered from a dict."""

from __future__ import annotations

from reflex_actions.catalog.models import DatasetContext


class InMemoryCatalog:
    """A CatalogReader over a dict of contexts; records which datasets were read."""

    def __init__(self, datasets: list[DatasetContext], statuses: dict[str, str] | None = None):
        self.datasets = {d.urn: d for d in datasets}
        self.statuses = statuses or {}
        self.read: list[str] = []

    def dataset(self, urn: str) -> DatasetContext | None:
        self.read.append(urn)
        return self.datasets.get(urn)

    def downstreams(self, urn: str) -> list[str]:
        return sorted(d.urn for d in self.datasets.values() if urn in d.upstreams)

    def user_status(self, urn: str) -> str | None:
        return self.statuses.get(urn)

    def datasets_by_domain(self, domain_urn: str) -> list[str]:
        return sorted(d.urn for d in self.datasets.values() if d.domain == domain_urn)

    def datasets_by_field(self, field_name: str) -> list[str]:
        wanted = field_name.lower()
        return sorted(
            d.urn for d in self.datasets.values() if any(f.name.lower() == wanted for f in d.fields)
        )

    def datasets_by_owner(self, owner_urn: str) -> list[str]:
        return sorted(
            d.urn for d in self.datasets.values() if any(o.owner == owner_urn for o in d.owners)
        )
