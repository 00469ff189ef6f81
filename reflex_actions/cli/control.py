"""``datahub-reflex control``: compile a control spec to SQL, or run it on one snapshot."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from reflex_actions.bounded import excerpt
from reflex_actions.cli.output import EXIT_CHECK_FAILED, EXIT_OK, print_json, reports_bad_input
from reflex_actions.controls import Control, load_control_spec
from reflex_actions.controls.base import MAX_COUNT
from reflex_actions.engines.base import TableTarget, table_source
from reflex_actions.errors import ReflexError
from reflex_actions.executor import (
    DEFAULT_SAMPLE_SIZE,
    REFERENCE_PARAMETER,
    ControlResult,
    ReferenceSnapshot,
    run_control,
)
from reflex_actions.snapshots import SnapshotFile
from reflex_actions.sql import (
    EXECUTED_DIALECTS,
    RENDERED_DIALECTS,
    SHOWN_DIALECT,
    Relation,
    shown_relation,
    shown_sql,
)
from reflex_actions.times import now_ms, parse_instant
from reflex_actions.vocabulary import display_name

#: Parameters bound to files at run time, not shown as values.
FILE_PARAMETERS = {"snapshot", REFERENCE_PARAMETER}


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
    target = control_spec.referenced()
    parent = (
        Relation(source=table_source(TableTarget(display_name(target.dataset))))
        if target is not None
        else None
    )
    return Relation(source=table_source(TableTarget(table)), reference=parent)


@control.command("run")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "--snapshot", required=True, type=click.Path(path_type=Path), help="Parquet or CSV file."
)
@click.option(
    "--reference",
    type=click.Path(path_type=Path),
    help="The referenced (parent) dataset's snapshot, for a control checked against one.",
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
    snapshot: Path,
    reference: Path | None,
    baseline_counts: str | None,
    as_of: str | None,
    sample_size: int,
    as_json: bool,
) -> None:
    """Run a control SPEC on one snapshot; exit 0 if it passes, 1 if it fails, 2 on bad input."""
    parent = (
        ReferenceSnapshot(SnapshotFile.from_path(reference), "given as --reference")
        if reference is not None
        else None
    )
    result = run_control(
        load_control_spec(spec),
        snapshot,
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
        f"{result.violation_count} {result.violation_unit} in {result.rows_scanned} row(s), "
        f"{result.allowed_violations} allowed, {result.elapsed_ms:.0f} ms"
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
