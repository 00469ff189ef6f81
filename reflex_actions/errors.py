"""Errors that name a problem the user can fix.

Every error Reflex raises on bad input derives from :class:`ReflexError`, so callers (the CLI,
the action's handlers) can report it cleanly and carry on instead of crashing.
"""


class ReflexError(Exception):
    """A problem with input or configuration; the message says what and where."""


class ControlSpecError(ReflexError):
    """A control spec that cannot be parsed or validated."""


class SnapshotError(ReflexError):
    """A snapshot that cannot be evaluated."""


class SnapshotNotFoundError(SnapshotError):
    """The snapshot file does not exist."""


class SnapshotUnreadableError(SnapshotError):
    """The snapshot file exists but cannot be read as a table."""


class SchemaDriftError(SnapshotError):
    """The snapshot lacks columns the control needs."""

    def __init__(self, snapshot: str, missing: list[str], available: list[str]) -> None:
        self.missing = missing
        self.available = available
        super().__init__(
            f"schema drift in {snapshot}: missing column(s) "
            f"{', '.join(repr(c) for c in missing)}; "
            f"the snapshot has {', '.join(repr(c) for c in available) or 'no columns'}"
        )


def first_line(error: BaseException) -> str:
    """The first line of an engine error: DuckDB appends a SQL excerpt that only confuses users."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
