"""Every catalog store passes the catalog conformance suite: DataHub Lite for real, the DataHub
server adapter over the FAKE GMS in every run, and over a real GMS when ``DATAHUB_GMS_URL`` is
set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflex_actions.catalog.base import Catalog
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.server import ServerCatalog
from tests.catalog.catalog_suite import GMS_URL, BaseCatalogConformance
from tests.catalog.fake_gms import FakeGmsServer
from tests.catalog.memory_catalog import MemoryCatalog


class TestLiteCatalog(BaseCatalogConformance):
    @pytest.fixture
    def catalog(self, tmp_path: Path) -> Iterator[Catalog]:
        store = LiteCatalog(tmp_path / "lite.db")
        yield store
        store.close()


class TestMemoryCatalog(BaseCatalogConformance):
    """The test double the handler unit tests use answers as the real stores do."""

    @pytest.fixture
    def catalog(self) -> Iterator[Catalog]:
        store = MemoryCatalog()
        yield store
        store.close()


class TestServerCatalogOverTheFakeGms(BaseCatalogConformance):
    @pytest.fixture
    def catalog(self) -> Iterator[Catalog]:
        with FakeGmsServer() as fake:
            store = ServerCatalog.from_config(fake.url)
            yield store
            store.close()
        assert not fake.unserved, f"calls the fake GMS does not model: {fake.unserved}"


class TestServerCatalogOverARealGms(BaseCatalogConformance):
    @pytest.fixture
    def catalog(self) -> Iterator[Catalog]:
        if not GMS_URL:
            pytest.skip("no DataHub server: set DATAHUB_GMS_URL to run the suite against one")
        store = ServerCatalog.from_config(GMS_URL, os.environ.get("DATAHUB_GMS_TOKEN"))
        yield store
        store.close()
