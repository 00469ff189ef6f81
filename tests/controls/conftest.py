"""Fixtures of the control tests: declaring control types (``tests.controls.declared``), and
installing the test package's lesson kinds beside them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest

from reflex_actions.plugins import rescan_plugins
from reflex_actions.registry import declared_controls, registered_kinds
from tests.controls.declared import write_declarations
from tests.kinds.conftest import install_kinds

__all__ = ["declare_controls", "install_kinds"]


def _forget_registry() -> None:
    rescan_plugins()
    declared_controls.cache_clear()
    registered_kinds.cache_clear()


@pytest.fixture
def declare_controls(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., None]]:
    """Declare control types for the test that asks; afterwards the registry is as it was."""
    site = tmp_path_factory.mktemp("site-packages")

    def declare(*lines: str) -> None:
        write_declarations(site, *lines)
        _forget_registry()

    sys.path.insert(0, str(site))
    try:
        yield declare
    finally:
        sys.path.remove(str(site))
        _forget_registry()
