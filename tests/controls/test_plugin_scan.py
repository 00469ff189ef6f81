"""The installed packages are scanned for plugins once, whatever groups are asked for."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoints
from pathlib import Path

import pytest

from reflex_actions import plugins
from reflex_actions.catalog.registry import store_class
from reflex_actions.engines import engine_class
from reflex_actions.registry import CONTROL_ENTRY_POINT_GROUP as GROUP
from reflex_actions.registry import declared_controls
from tests.controls.declared import write_declarations


def test_engines_control_types_and_stores_are_found_in_one_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans: list[int] = []
    real: Callable[[], EntryPoints] = plugins.entry_points

    def counted() -> EntryPoints:
        scans.append(1)
        return real()

    monkeypatch.setattr(plugins, "entry_points", counted)
    plugins.rescan_plugins()
    declared_controls.cache_clear()
    try:
        assert engine_class("duckdb").name == "duckdb"
        assert "uniqueness" in declared_controls()
        assert store_class("lite") is not None
        assert engine_class("postgres").name == "postgres"
    finally:
        plugins.rescan_plugins()
        declared_controls.cache_clear()
    assert len(scans) == 1


def test_a_package_on_a_folder_added_to_the_path_is_seen_without_a_rescan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "a_new_type" not in {point.name for point in plugins.entry_points_in(GROUP)}
    site = write_declarations(tmp_path / "site-packages", "a_new_type = tests.nowhere:Nothing")
    monkeypatch.syspath_prepend(str(site))
    assert {point.name: point.value for point in plugins.entry_points_in(GROUP)}[
        "a_new_type"
    ] == "tests.nowhere:Nothing"
