"""The action opens the catalog store its configuration names, from the registered stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.registry import store_class
from reflex_actions.catalog.server import ServerCatalog


def test_the_built_in_stores_are_registered_by_name() -> None:
    assert store_class("lite") is LiteCatalog
    assert store_class("datahub") is ServerCatalog


def test_an_unknown_store_is_refused_naming_the_registered_ones(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"no catalog store 'nope'; registered: datahub, lite"):
        ReflexAction.create(
            {"catalog": "nope", "store": str(tmp_path / "s.db")}, PipelineContext("p", None)
        )


def test_the_embedded_store_is_the_default_with_a_store_file_and_needs_it(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    LiteCatalog(store).close()  # what `datahub-reflex init` makes
    action = ReflexAction.create({"store": str(store)}, PipelineContext("p", None))
    assert action.context.config.catalog_store() == "lite"
    action.close()
    with pytest.raises(CatalogError, match="needs a `datahub:` block"):
        ReflexAction.create({}, PipelineContext("p", None))
    with pytest.raises(CatalogError, match="needs `store`"):
        ReflexAction.create({"catalog": "lite"}, PipelineContext("p", None))


def test_the_embedded_store_must_exist_as_its_change_feed_needs(tmp_path: Path) -> None:
    """An action (or ``evaluate``) given a store that is not there refuses it, creating none."""
    missing = tmp_path / "nowhere" / "s.db"
    with pytest.raises(CatalogError, match=r"nowhere/s\.db does not exist"):
        ReflexAction.create({"store": str(missing)}, PipelineContext("p", None))
    assert list(tmp_path.iterdir()) == []
