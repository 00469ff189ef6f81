"""``datahub-reflex backtest``: replay a control over snapshot histories and score it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path

import click

from reflex_actions.backtest import BacktestReport, History, backtest, load_history
from reflex_actions.backtest.engine import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_SAMPLE_SIZE,
    embedded_engine,
    validate_memory_limit,
)
from reflex_actions.backtest.history import delta_history, iceberg_history, partition_history
from reflex_actions.bounded import excerpt
from reflex_actions.cli.output import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    checked_by,
    print_json,
    reports_bad_input,
)
from reflex_actions.cli.targets import TargetOptions, referenced_table, table_options
from reflex_actions.controls import Control, load_control_spec
from reflex_actions.controls.base import validate_column_name
from reflex_actions.engines import DEFAULT_ENGINE, open_engine
from reflex_actions.engines.base import (
    DeltaTarget,
    Engine,
    FileTarget,
    IcebergTarget,
    TableTarget,
)
from reflex_actions.errors import ReflexError
from reflex_actions.report.backtest import render_html, render_markdown
from reflex_actions.safe_files import check_file, write_file


class TerminalProgress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, width: int = 30) -> None:
        self.width = width

    def __call__(self, dataset: str, fraction: float) -> None:
        filled = int(self.width * min(max(fraction, 0.0), 1.0))
        bar = "#" * filled + "-" * (self.width - filled)
        end = "\n" if fraction >= 1.0 else ""
        click.echo(f"\r{dataset[:40]:40} [{bar}] {fraction:4.0%}", err=True, nl=False)
        if end:
            click.echo("", err=True)


def _below(value: float | None, threshold: float | None) -> bool:
    return threshold is not None and (value is None or value < threshold)


def _check_reference(
    control: Control,
    folder: Path | None,
    table: str | None,
    child: TargetOptions,
    partition_column: str | None,
) -> None:
    """Refuse a parent that cannot be paired, before anything is read: a referencing control
    is backtested against the history given (``--reference-history`` or ``--reference-table``)
    or, on a table's partitions, the referenced dataset's table partitioned alike."""
    target = control.referenced()
    given = "--reference-history" if folder is not None else "--reference-table"
    if folder is not None and table is not None:
        raise ReflexError("--reference-history and --reference-table name two parents: give one")
    if target is None:
        if folder is not None or table is not None:
            raise ReflexError(f"{given}: a {control.type} control references no dataset")
        return
    on_partitions = child.table is not None and partition_column is not None
    if table is not None and not on_partitions:
        raise ReflexError(
            "--reference-table pairs a table's partitions: give --table with --partition-column"
        )
    if folder is None and not on_partitions:
        raise ReflexError(
            f"{control.type} checks values against {target.dataset}: give its history as "
            "--reference-history DIR"
        )


def _reference_histories(
    engine: Engine,
    control: Control,
    folder: Path | None,
    table: str | None,
    child: TargetOptions,
    partition_column: str | None,
) -> dict[str, History]:
    """The parent's history (by its urn), as ``_check_reference`` allowed it: on a table's
    partitions, the parent table's partitions of the same column, paired by value, as
    ``control run`` and landing pair a partition with the parent's same one."""
    target = control.referenced()
    if target is None:
        return {}
    if folder is not None:
        return {target.dataset: load_history(folder)}
    if table is not None:  # read as the child's --table is: a table, or a file when embedded
        parent = replace(child, table=table).target(engine)
    else:
        parent = referenced_table(control)
        if not isinstance(child.target(engine), TableTarget) or parent is None:
            raise ReflexError(
                f"{control.type} checks values against {target.dataset}, which the "
                f"{engine.name} engine names no table of: give its history as "
                "--reference-history DIR, or its table as --reference-table"
            )
    assert partition_column is not None and isinstance(parent, (TableTarget, FileTarget))
    history = partition_history(engine, parent, partition_column, dataset=target.dataset)
    return {target.dataset: history}


@contextmanager
def _writing_report(path: Path) -> Iterator[None]:
    """The HTML report file that cannot be written, as bad input naming it."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ReflexError(f"cannot write the report {excerpt(str(path))}: {reason}") from None


@contextmanager
def _engine(name: str, memory_limit: str) -> Iterator[Engine]:
    """The engine the backtest runs on: the embedded one bounded by ``memory_limit``, or the
    one named, connected by its environment variables."""
    if name == DEFAULT_ENGINE:
        with embedded_engine(memory_limit) as engine:
            yield engine
    else:
        with closing(open_engine(name)) as engine:
            yield engine


def _check_table_options(
    targets: TargetOptions, partition_column: str | None, labels: Path | None
) -> None:
    if labels is not None and not targets.given:
        raise ReflexError(
            "--labels labels a table's history; a history folder keeps its own labels.yaml"
        )
    if partition_column is not None and (targets.table is None or targets.iceberg is not None):
        raise ReflexError("--partition-column COL makes a history of the partitions of --table")


def _table_history(
    engine: Engine, targets: TargetOptions, partition_column: str | None, labels: Path | None
) -> History:
    """The history the table options name: an Iceberg table's snapshots, a Delta table's
    versions, or a table's partitions."""
    target = targets.target(engine)
    if isinstance(target, IcebergTarget):
        return iceberg_history(target.catalog, target.table, labels=labels)
    if isinstance(target, DeltaTarget):
        return delta_history(target.path, labels=labels)
    if partition_column is None:
        raise ReflexError(
            f"{target.shown[:200]} has no history by itself: give --partition-column COL"
        )
    return partition_history(engine, target, partition_column, labels=labels)


@click.command("backtest")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "--history",
    "histories",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A dataset's history folder (snapshot files + labels.yaml); repeat for several.",
)
@table_options
@click.option(
    "--partition-column",
    metavar="COL",
    callback=checked_by(validate_column_name),
    help="Backtest on --table's partitions: one evaluation per value of COL.",
)
@click.option(
    "--labels",
    type=click.Path(path_type=Path),
    help="The failures of a table's history (labels.yaml format; ids are partition values, "
    "Iceberg snapshot ids or Delta versions).",
)
@click.option(
    "--reference-history",
    type=click.Path(path_type=Path),
    help="The referenced (parent) dataset's history, for a control checked against one: each "
    "snapshot is paired with the parent's of the same id, or its latest one before it.",
)
@click.option(
    "--reference-table",
    help="With --table and --partition-column: the referenced (parent) dataset's table on the "
    "same engine, its partitions paired by value (default: the referenced dataset's name).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--report", "report_path", type=click.Path(path_type=Path), help="Write an HTML report."
)
@click.option(
    "--sample-size", default=DEFAULT_SAMPLE_SIZE, show_default=True, type=click.IntRange(0)
)
@click.option(
    "--memory-limit",
    default=DEFAULT_MEMORY_LIMIT,
    show_default=True,
    callback=checked_by(validate_memory_limit),
    help="The embedded engine's memory limit (it spills to disk beyond it), e.g. 2GiB.",
)
@click.option("--min-precision", type=click.FloatRange(0, 1), help="Exit 1 if precision is lower.")
@click.option("--min-recall", type=click.FloatRange(0, 1), help="Exit 1 if recall is lower.")
@reports_bad_input
def backtest_command(
    spec: Path,
    histories: tuple[Path, ...],
    targets: TargetOptions,
    partition_column: str | None,
    labels: Path | None,
    reference_history: Path | None,
    reference_table: str | None,
    as_json: bool,
    report_path: Path | None,
    sample_size: int,
    memory_limit: str,
    min_precision: float | None,
    min_recall: float | None,
) -> None:
    """Backtest a control SPEC on historical snapshots and report precision, recall, coverage.

    The history is a folder (--history), a table's partitions (--table with
    --partition-column), an Iceberg table's snapshots (--iceberg) or a Delta table's versions
    (--delta); the JSON is the same for each."""
    control = load_control_spec(spec)
    _check_table_options(targets, partition_column, labels)
    if not histories and not targets.given:
        raise ReflexError(
            "no history given: --history DIR, or a table (--table with --partition-column, "
            "--iceberg, --delta)"
        )
    _check_reference(control, reference_history, reference_table, targets, partition_column)
    if report_path is not None:
        with _writing_report(report_path):  # refused before the backtest runs, not after it
            check_file(report_path)
    with _engine(targets.engine, memory_limit) as engine:
        loaded = [load_history(folder) for folder in histories]
        if targets.given:
            loaded.append(_table_history(engine, targets, partition_column, labels))
        references = _reference_histories(
            engine, control, reference_history, reference_table, targets, partition_column
        )
        report: BacktestReport = backtest(
            control,
            loaded,
            sample_size=sample_size,
            memory_limit=memory_limit,
            progress=TerminalProgress() if sys.stderr.isatty() else None,
            references=references,
            engine=engine,
        )
    if report_path is not None:
        with _writing_report(report_path):
            write_file(report_path, render_html(report))
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        click.echo(render_markdown(report), nl=False)
        if report_path is not None:
            click.echo(f"\nHTML report written to {report_path}")
    failed = _below(report.precision, min_precision) or _below(report.recall, min_recall)
    sys.exit(EXIT_CHECK_FAILED if failed else EXIT_OK)
