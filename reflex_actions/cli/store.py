"""Choosing the catalog a command works on: the embedded Lite file or a DataHub server."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from reflex_actions.catalog.base import Catalog

DEFAULT_STORE = "reflex.db"


def open_catalog(store: Path, gms: str | None, token: str | None) -> Catalog:
    if gms:
        from reflex_actions.catalog.server import ServerCatalog

        return ServerCatalog.from_config(gms, token)
    from reflex_actions.catalog.lite import LiteCatalog

    return LiteCatalog(store)


def with_catalog(embedded_only: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``--store`` (and ``--gms``/``--token`` unless embedded-only) and pass ``catalog``."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(
            *args: Any, store: Path, gms: str | None = None, token: str | None = None, **kwargs: Any
        ) -> Any:
            catalog = open_catalog(store, gms, token)
            try:
                return command(*args, catalog=catalog, **kwargs)
            finally:
                catalog.close()

        wrapper = click.option(
            "--store",
            type=click.Path(path_type=Path),
            default=lambda: os.environ.get("REFLEX_STORE", DEFAULT_STORE),
            show_default=f"$REFLEX_STORE or {DEFAULT_STORE}",
            help="The embedded DataHub Lite file.",
        )(wrapper)
        if not embedded_only:
            wrapper = click.option(
                "--gms", envvar="DATAHUB_GMS_URL", help="A DataHub server instead."
            )(wrapper)
            wrapper = click.option("--token", envvar="DATAHUB_GMS_TOKEN", help="Its access token.")(
                wrapper
            )
        return wrapper

    return decorate
