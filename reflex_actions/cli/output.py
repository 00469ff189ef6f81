"""Exit codes and output conventions shared by every command (DESIGN.md §5)."""

from __future__ import annotations

import atexit
import functools
import gc
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


def free_nothing_at_exit() -> None:
    """Let the process end without freeing what its start-up built, object by object.

    A command's process exits as soon as it is done, and the interpreter's last collection
    then frees every class, schema and function that importing sqlglot, pydantic and DuckDB
    made (~50,000 objects: ~100 ms of a `control run`, more than its queries). Frozen at exit
    (``gc.freeze``), they are left to the operating system; objects no cycle holds are still
    released as the modules are cleared, and the atexit handlers registered before this one
    still run. Registered once however often it is called; in a process that goes on (a test
    runner) it acts only when that process exits."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


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
