"""Exit codes and output conventions shared by every command (DESIGN.md §5)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from reflex_actions.errors import ReflexError

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2

F = TypeVar("F", bound=Callable[..., Any])


def print_json(payload: Any) -> None:
    click.echo(json.dumps(payload, indent=2, default=str))


def reports_bad_input(command: F) -> F:
    """Turn a ReflexError into a one-line message (JSON with ``--json``) and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ReflexError as error:
            if kwargs.get("as_json"):
                print_json({"error": str(error)})
            else:
                click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]
