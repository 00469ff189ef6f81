"""Session fixtures shared by the lesson tests: the demo histories and the demo estate store."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.demo.history import generate_histories
from reflex_actions.demo.metadata import estate_mcps


@pytest.fixture(scope="session")
def histories_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's generated snapshot histories (read-only: never write under it)."""
    root = tmp_path_factory.mktemp("histories") / "snapshots"
    generate_histories(root)
    return root


@pytest.fixture(scope="session")
def estate_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed Lite store holding Reflex's bootstrap and the demo estate; copy it to write."""
    path = tmp_path_factory.mktemp("estate") / "estate.db"
    catalog = LiteCatalog(path)
    catalog.emit([*bootstrap_mcps(), *estate_mcps()])
    catalog.close()
    return path
