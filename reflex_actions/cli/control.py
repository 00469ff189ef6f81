"""``datahub-reflex control``: compile a control spec to SQL, or run it on one snapshot."""

from __future__ import annotations

import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import click

from reflex_actions.bounded import excerpt
from reflex_actions.cli.output import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    checked_by,
    free_nothing_at_exit,
    print_json,
    reports_bad_input,
)
from reflex_actions.cli.targets import TargetOptions, referenced_table, target_options
from reflex_actions.controls import Control, load_control_spec
from reflex_actions.controls.base import MAX_COUNT, validate_column_name
from reflex_actions.engines import open_engine
from reflex_actions.engines.base import FileTarget, TableTarget, Target, table_source
from reflex_actions.engines.rendering import RenderedStore, keeping_rendered_in
from reflex_actions.errors import ReflexError
from reflex_actions.executor import (
    DEFAULT_SAMPLE_SIZE,
    REFERENCE_PARAMETER,
    ControlResult,
    ReferenceSnapshot,
    run_control,
)
from reflex_actions.sql import (
    EXECUTED_DIALECTS,
    RENDERED_DIALECTS,
    SHOWN_DIALECT,
    Relation,
    shown_relation,
    shown_sql,
)
from reflex_actions.times import now_ms, parse_instant
from reflex_actions.wording import plural

#: Parameters bound to files at run time, not shown as values.
FILE_PARAMETERS = {"snapshot", REFERENCE_PARAMETER}

free_nothing_at_exit()  # a compile or a run ends its process: nothing to free one by one


@click.group()
def control() -> None:
    """Compile and run controls."""


@control.command("compile")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "--dialect",
    type=click.Choice([*EXECUTED_DIALECTS, *RENDERED_DIALECTS]),
    default=SHOWN_DIALECT,
    show_default=True,
    help="The SQL dialect: an engine's (duckdb, postgres, spark), or one only rendered.",
)
@click.option(
    "--table",
    help="The table the control reads (db.schema.table), for a dialect other than duckdb; "
    "a referenced dataset's table is its urn's name.",
)
@click.option("--json", "as_json", is_flag=True, help="Print SQL and parameters as JSON.")
@reports_bad_input
def compile_command(spec: Path, dialect: str, table: str | None, as_json: bool) -> None:
    """Print the SQL a control SPEC compiles to: the counts, then the sample run only when
    they fail (values are bound parameters, shown as comments)."""
    control_spec = load_control_spec(spec)
    relation = _shown_relation(control_spec, dialect, table)
    query = control_spec.compile(relation, sample_size=DEFAULT_SAMPLE_SIZE)
    params = {name: value for name, value in query.params.items() if name not in FILE_PARAMETERS}
    sql = shown_sql(query, relation, dialect)
    if as_json:
        print_json(
            {"type": control_spec.type, "dialect": dialect, "sql": sql, "parameters": params}
        )
        return
    click.echo(f"-- {control_spec.type}: {control_spec.describe()}")
    if dialect == SHOWN_DIALECT:
        click.echo("-- $snapshot = the snapshot file (read_csv(..., all_varchar = true) for CSV)")
        if (target := control_spec.referenced()) is not None:
            click.echo(f"-- ${REFERENCE_PARAMETER} = the snapshot of {target.dataset}")
    for name, value in params.items():
        click.echo(f"-- {name} = {value!r}")
    click.echo(sql + ";")


def _shown_relation(control_spec: Control, dialect: str, table: str | None) -> Relation:
    """What the shown SQL reads: the snapshot file in DuckDB, else the named table (and the
    referenced dataset's table, by its urn's name)."""
    if dialect == SHOWN_DIALECT and table is None:
        return shown_relation()
    if table is None:
        raise ReflexError(f"--dialect {dialect} reads a table: give it with --table NAME")
    parent = referenced_table(control_spec)
    return Relation(
        source=table_source(TableTarget(table)),
        reference=Relation(source=table_source(parent)) if parent is not None else None,
    )


def _default_parent(control_spec: Control, child: Target) -> ReferenceSnapshot | None:
    """The parent a table is checked against when none is given: the referenced dataset's
    table (its partition of the same value, when the child is one partition), as landing
    reads it; None for a child that is no engine's table (a file, an Iceberg or Delta table)."""
    parent = referenced_table(control_spec)
    if parent is None or not isinstance(child, TableTarget):
        return None
    if child.partition_column is None:
        return ReferenceSnapshot(parent, "the live table")
    same = replace(parent, partition_column=child.partition_column, partition=child.partition)
    return ReferenceSnapshot(same, "the same partition")


@control.command("run")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option("--snapshot", type=click.Path(path_type=Path), help="A Parquet or CSV file.")
@target_options
@click.option(
    "--partition-column",
    callback=checked_by(validate_column_name),
    help="With --partition: judge only the rows of the table (or file) holding that value.",
)
@click.option("--partition", help="The partition's value in --partition-column (e.g. a date).")
@click.option(
    "--reference",
    type=click.Path(path_type=Path),
    help="The referenced (parent) dataset's snapshot, for a control checked against one.",
)
@click.option(
    "--reference-table",
    help="The referenced (parent) dataset's table on the same engine (db.schema.table); "
    "default for a table: the referenced urn's name (its same --partition).",
)
@click.option(
    "--baseline-counts",
    help="The dataset's earlier row counts, oldest first (e.g. 900,1000,950), for a control "
    "that judges a count against them; without them it judges on its absolute bounds alone.",
)
@click.option(
    "--as-of",
    help="The time a control judging age is judged at (ISO 8601; no zone = UTC); default now.",
)
@click.option(
    "--sample-size", default=DEFAULT_SAMPLE_SIZE, show_default=True, type=click.IntRange(0)
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@reports_bad_input
def run_command(
    spec: Path,
    snapshot: Path | None,
    targets: TargetOptions,
    partition_column: str | None,
    partition: str | None,
    reference: Path | None,
    reference_table: str | None,
    baseline_counts: str | None,
    as_of: str | None,
    sample_size: int,
    as_json: bool,
) -> None:
    """Run a control SPEC on one snapshot file, or a table of any engine (or one partition
    of it); exit 0 if it passes, 1 if it fails, 2 on bad input. Connections come from the
    environment (e.g. REFLEX_POSTGRES_URL); the JSON is the same for every engine."""
    control_spec = load_control_spec(spec)
    if (snapshot is None) == (not targets.given):
        raise ReflexError("give --snapshot FILE, or a table: --table, --iceberg or --delta")
    if reference is not None and reference_table is not None:
        raise ReflexError("--reference and --reference-table name two parents: give one")
    # a run is a process: what it renders is kept on disk for the next (engines.rendering)
    with (
        closing(open_engine(targets.engine)) as engine,
        keeping_rendered_in(RenderedStore.default()),
    ):
        target = _partition_of(
            FileTarget(snapshot) if snapshot is not None else targets.target(engine),
            partition_column,
            partition,
        )
        if reference is not None:
            parent = ReferenceSnapshot(FileTarget(reference), "given as --reference")
        elif reference_table is not None:
            parent = ReferenceSnapshot(TableTarget(reference_table), "given as --reference-table")
        else:
            parent = _default_parent(control_spec, target)
        result = run_control(
            control_spec,
            target,
            engine=engine,
            sample_size=sample_size,
            reference=parent,
            earlier_counts=_counts(baseline_counts),
            as_of_ms=now_ms() if as_of is None else parse_instant(as_of),
        )
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        _print_result(result)
    sys.exit(EXIT_OK if result.passed else EXIT_CHECK_FAILED)


def _partition_of(target: Target, column: str | None, value: str | None) -> Target:
    """The target, or the rows of it holding ``value`` in ``column`` (both or neither)."""
    if (column is None) != (value is None):
        raise ReflexError("--partition-column and --partition go together")
    if column is None:
        return target
    if not isinstance(target, (TableTarget, FileTarget)):
        raise ReflexError(f"{target.shown[:200]} is read whole: it has no --partition-column")
    return replace(target, partition_column=column, partition=value)


#: Most earlier counts accepted on the command line.
MAX_BASELINE_COUNTS = 365


def _counts(text: str | None) -> list[int]:
    """``900,1000,950`` as counts; a bad list is bad input that names the problem."""
    if text is None:
        return []
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > MAX_BASELINE_COUNTS:
        raise ReflexError(f"--baseline-counts: at most {MAX_BASELINE_COUNTS} counts")
    if not all(part.isdigit() and len(part) <= len(str(MAX_COUNT)) for part in parts):
        raise ReflexError(
            f"--baseline-counts: expected counts like 900,1000,950, got {excerpt(text)}"
        )
    return [int(part) for part in parts]


def _print_result(result: ControlResult) -> None:
    verdict = "PASS" if result.passed else "FAIL"
    click.echo(
        f"{verdict}  {result.control_type}: {result.control}\n"
        f"      snapshot {result.snapshot_id} ({result.snapshot}): "
        f"{result.violation_count} {result.violation_unit} in "
        f"{plural(result.rows_scanned, 'row')}, {result.allowed_violations} allowed, "
        f"{result.elapsed_ms:.0f} ms"
    )
    if result.reference is not None:
        click.echo(
            f"      checked against {result.reference.snapshot} "
            f"({result.reference.snapshot_id}, {result.reference.chosen})"
        )
    if result.measures is not None:
        click.echo(f"      measured {result.measures}")
    for row in result.sample:
        click.echo(f"      - {row}")
