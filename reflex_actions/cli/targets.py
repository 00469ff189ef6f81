"""CLI options naming what a control runs on, beyond a snapshot file: an engine's table, an
Iceberg table (at one snapshot) or a Delta table (at one version). Shared by ``control run``
and ``backtest``.

``--table`` names what the engine reads as a table: a table of its catalog
(``db.schema.table``) on an engine that reads tables, a Parquet or CSV file on the embedded
engine (which reads files only); with ``--iceberg CATALOG`` it is the Iceberg table
(``namespace.table``) of that pyiceberg catalog, configured as pyiceberg configures it
(``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*`` variables).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from reflex_actions.engines import DEFAULT_ENGINE, open_engine
from reflex_actions.engines.base import (
    DeltaTarget,
    Engine,
    EngineError,
    FileTarget,
    IcebergTarget,
    TableTarget,
    Target,
)
from reflex_actions.errors import ReflexError
from reflex_actions.vocabulary import display_name

if TYPE_CHECKING:
    from reflex_actions.controls import Control

_Command = TypeVar("_Command", bound=Callable[..., Any])


@dataclass(frozen=True)
class TargetOptions:
    """What the target options say: the engine's name and at most one table."""

    engine: str = DEFAULT_ENGINE
    table: str | None = None
    iceberg: str | None = None
    snapshot_id: int | None = None
    delta: str | None = None
    version: int | None = None

    @property
    def given(self) -> bool:
        """Whether a table (of any kind) was named."""
        return any(value is not None for value in (self.table, self.iceberg, self.delta))

    def check(self) -> None:
        """Refuse options that name no one table: bad input naming the clash."""
        if self.iceberg is not None and self.delta is not None:
            raise ReflexError("--iceberg and --delta name two tables: give one")
        if self.iceberg is not None and self.table is None:
            raise ReflexError("--iceberg CATALOG needs --table NAMESPACE.TABLE")
        if self.delta is not None and self.table is not None:
            raise ReflexError("--delta PATH names the table itself: drop --table")
        if self.snapshot_id is not None and self.iceberg is None:
            raise ReflexError("--snapshot-id is an Iceberg table's snapshot: give --iceberg")
        if self.version is not None and self.delta is None:
            raise ReflexError("--version is a Delta table's version: give --delta")

    def target(self, engine: Engine) -> Target:
        """The table the options name, as ``engine`` reads it; raise when they name none or
        one the engine does not read."""
        self.check()
        if self.iceberg is not None:
            assert self.table is not None
            target: Target = IcebergTarget(self.iceberg, self.table, self.snapshot_id)
        elif self.delta is not None:
            target = DeltaTarget(self.delta, self.version)
        elif self.table is None:
            raise ReflexError("no table given: --table, --iceberg or --delta")
        elif engine.supports(TableTarget(self.table)):
            target = TableTarget(self.table)
        else:
            target = FileTarget(Path(self.table))
        if not engine.supports(target):
            raise EngineError(f"the {engine.name} engine does not read {target.shown[:200]}")
        return target


#: Each option, by the name its value is passed under.
_OPTIONS: dict[str, Callable[[Any], Any]] = {
    "engine": click.option(
        "--engine",
        default=DEFAULT_ENGINE,
        show_default=True,
        help="The engine the control runs on (registered in reflex_actions.engines).",
    ),
    "table": click.option(
        "--table",
        help="A table of the engine (db.schema.table; a Parquet/CSV file on duckdb), or with "
        "--iceberg the Iceberg table (namespace.table).",
    ),
    "iceberg": click.option(
        "--iceberg",
        metavar="CATALOG",
        help="A pyiceberg catalog (.pyiceberg.yaml or PYICEBERG_CATALOG__<NAME>__* variables) "
        "holding --table.",
    ),
    "snapshot_id": click.option(
        "--snapshot-id", type=int, help="The Iceberg snapshot (default: the current one)."
    ),
    "delta": click.option("--delta", metavar="PATH", help="A Delta Lake table's folder."),
    "version": click.option(
        "--version", type=click.IntRange(0), help="The Delta version (default: the latest)."
    ),
}


def target_options(command: _Command) -> _Command:
    """Add ``--engine``, ``--table``, ``--iceberg``, ``--snapshot-id``, ``--delta`` and
    ``--version`` to a click command, passed to it as one ``targets: TargetOptions``."""
    return _with_options(command, tuple(_OPTIONS))


def table_options(command: _Command) -> _Command:
    """The same options without ``--snapshot-id`` and ``--version``, for a command reading a
    table's whole history (every snapshot, every version)."""
    return _with_options(command, ("engine", "table", "iceberg", "delta"))


def _with_options(command: _Command, names: tuple[str, ...]) -> _Command:
    @functools.wraps(command)
    def with_targets(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in names}
        return command(*args, targets=TargetOptions(**values), **kwargs)

    decorated: Any = with_targets
    for name in reversed(names):
        decorated = _OPTIONS[name](decorated)
    return decorated


def referenced_table(control: Control) -> TableTarget | None:
    """The referenced (parent) dataset's table on the engine the child's table is read on, as
    landing pairs them: its urn's name; None for a control that references no dataset."""
    target = control.referenced()
    return TableTarget(display_name(target.dataset)) if target is not None else None


def open_target(options: TargetOptions) -> tuple[Engine, Target]:
    """The engine the options name, connected (the caller closes it), and the table they name
    as it reads it."""
    engine = open_engine(options.engine)
    try:
        return engine, options.target(engine)
    except BaseException:
        engine.close()
        raise
