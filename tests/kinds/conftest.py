"""Installing the test package's lesson kinds (``tests.plugin_kinds``) the way pip would: a
``.dist-info`` with an ``entry_points.txt`` on ``sys.path``, seen only by the tests that ask."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest

from reflex_actions.plugins import rescan_plugins
from reflex_actions.registry import ENTRY_POINT_GROUP, registered_kinds

DISTRIBUTION = "reflex_test_kinds-0.0.dist-info"
ENTRY_POINT = "empty_table = tests.plugin_kinds.empty_table:EmptyTableKind"
MODULE = "tests.plugin_kinds.empty_table"


@pytest.fixture
def install_kinds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], None]]:
    """Install entry point lines in ``reflex_actions.kinds`` the way pip would, for the test
    that asks; afterwards the registry (its kinds, and so their control types) is as it was."""
    site = tmp_path_factory.mktemp("site-packages")
    info = site / DISTRIBUTION
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reflex-test-kinds\nVersion: 0.0\n")

    def install(*entry_points: str) -> None:
        (info / "entry_points.txt").write_text(
            f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{line}\n" for line in entry_points)
        )
        rescan_plugins()
        registered_kinds.cache_clear()

    sys.path.insert(0, str(site))
    try:
        yield install
    finally:
        sys.path.remove(str(site))
        sys.modules.pop(MODULE, None)
        registered_kinds.cache_clear()


@pytest.fixture
def plugin_installed(install_kinds: Callable[..., None]) -> None:
    """The empty-table kind registered through the entry point group."""
    install_kinds(ENTRY_POINT)
