"""The registered catalog stores (entry point group ``reflex_actions.catalogs``).

The built-in stores, ``lite`` (DataHub Lite, embedded) and ``datahub`` (a DataHub server), are
registered the same way as a store from another package; the action opens the one its
configuration names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflex_actions.bounded import safe_excerpt
from reflex_actions.catalog.base import Catalog, CatalogError
from reflex_actions.plugins import entry_points_in, load_plugin

if TYPE_CHECKING:
    from datahub.ingestion.graph.client import DataHubGraph

    from reflex_actions.config import ReflexConfig

ENTRY_POINT_GROUP = "reflex_actions.catalogs"


def store_class(name: str) -> type[Catalog]:
    points = {point.name: point for point in entry_points_in(ENTRY_POINT_GROUP)}
    if name not in points:
        known = ", ".join(sorted(points))
        raise CatalogError(f"no catalog store {safe_excerpt(name)}; registered: {known}")
    return load_plugin(points[name], Catalog, "catalog store", CatalogError)


def open_store(config: ReflexConfig, graph: DataHubGraph | None) -> tuple[Catalog, ReflexConfig]:
    """The configured store, and the config with every actor it records for Reflex's writes."""
    catalog = store_class(config.catalog_store()).open_for(config, graph)
    own = list(dict.fromkeys([*config.own_actors, *catalog.own_actors()]))
    return catalog, config.model_copy(update={"own_actors": own})
