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

from reflex_actions.bounded import excerpt
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


def _path_refused(error: OSError) -> str:
    """``cannot use '/tmp/aaa...': File name too long``: the path cut, the system's reason."""
    reason = error.strerror or type(error).__name__
    if error.filename is None:
        return reason
    return f"cannot use {excerpt(str(error.filename))}: {reason}"


def checked_by(
    validate: Callable[[str], str],
) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A click callback refusing an option's value that ``validate`` raises ValueError for, as
    a usage error naming the option (the same check a config file's value goes through)."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return validate(value)
        except ValueError as error:
            raise click.BadParameter(str(error), ctx=ctx, param=param) from None

    return callback


def reports_bad_input(command: F) -> F:
    """Turn a ReflexError into a one-line message (JSON with ``--json``) and exit code 2; so
    too a path the system refuses to look at (a name too long, a folder it may not enter)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (ReflexError, OSError) as error:
            message = str(error) if isinstance(error, ReflexError) else _path_refused(error)
            if kwargs.get("as_json"):
                print_json({"error": message})
            else:
                click.echo(f"error: {message}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]
