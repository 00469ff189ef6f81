"""Shared fixtures: writing small snapshot tables to Parquet or CSV; no network but loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reflex_actions.testing.cases import write_snapshot

__all__ = ["write_snapshot"]  # tests import it from here

SnapshotWriter = Callable[[Path, list[dict[str, Any]]], Path]

# DataHub's SDK phones home (usage telemetry, a PyPI version check) unless told not to.
os.environ.setdefault("DATAHUB_TELEMETRY_ENABLED", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_resolve = socket.getaddrinfo


def _is_loopback(host: Any) -> bool:
    if host is None or host == "localhost":
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    try:
        return ipaddress.ip_address(name.split("%")[0]).is_loopback
    except ValueError:
        return False  # a name other than localhost: never even looked up


def _loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
    """Tests may only talk to this machine: any other host fails at once, naming it."""
    if not _is_loopback(host):
        raise OSError(f"tests may not reach {host!r}: only loopback is allowed")
    return _resolve(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", _loopback_only)


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each test's own cache folder (what `control run` renders), never the user's."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("REFLEX_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(params=["parquet", "csv"])
def snapshot_format(request: pytest.FixtureRequest) -> str:
    return request.param


# The demo stages (full loop, drafted, pending, published), defined once here so that every
# folder's tests share one build of each session stage; imported last, after the settings above.
from tests.stages import *  # noqa: E402, F403
