"""Choosing the catalog a command works on: the embedded Lite file or a DataHub server."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from reflex_actions.catalog.base import Catalog, CatalogError

if TYPE_CHECKING:
    from reflex_actions.catalog.lite import Access

DEFAULT_STORE = "reflex.db"


def open_catalog(
    store: str, gms: str | None, token: str | None, access: Access, *, has_gms: bool = True
) -> Catalog:
    """The server ``gms`` names, else the Lite file ``store`` opened as ``access`` says: a
    command that only reads creates nothing, and one that edits needs the store to exist."""
    if gms:
        from reflex_actions.catalog.server import ServerCatalog

        return ServerCatalog.from_config(gms, token)
    from reflex_actions.catalog.lite import LiteCatalog, StoreIsUrlError

    try:
        return LiteCatalog(store, access=access)
    except StoreIsUrlError as error:
        if not has_gms:
            raise
        raise CatalogError(f"{error}: give a DataHub server with --gms") from None


def with_catalog(
    access: Access, embedded_only: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``--store`` (and ``--gms``/``--token`` unless embedded-only) and pass ``catalog``,
    the store opened as ``access`` says (``read``, ``write`` an existing one, ``create``)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(
            *args: Any, store: str, gms: str | None = None, token: str | None = None, **kwargs: Any
        ) -> Any:
            catalog = open_catalog(store, gms, token, access, has_gms=not embedded_only)
            try:
                return command(*args, catalog=catalog, **kwargs)
            finally:
                catalog.close()

        # a str, not a Path: Path("http://host") would read "http:/host"
        wrapper = click.option(
            "--store",
            type=click.Path(),
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
