"""Benchmark Reflex's referential_integrity control against hand-written DuckDB SQL and polars.

Usage::

    python bench/bench_referential_integrity.py [--rows 10000000] [--repeat 3]
        [--data-dir /tmp/reflex-bench] [--max-wait 300]

The check: every non-NULL ``order_id`` of a child ``order_lines`` snapshot exists in the
``order_id`` of its parent ``orders`` snapshot; count the orphaned rows and show the 5 missing
order ids with the most rows (worst first), as Reflex's result does. Generated once with DuckDB
SQL and cached in ``--data-dir`` (a temp folder by default):

- ``orders``: ``rows / 10`` order ids ``0 .. rows/10 - 1`` (BIGINT) less every multiple of
  1,000 (the deleted orders), with a customer and a timestamp, in id order; written twice, as
  Parquet (typed) and as CSV (text);
- ``order_lines``: ``rows`` lines (``line_id``, ``order_id``, ``quantity``, ``amount``), in
  line order; ``order_id`` is NULL in 1 % of the rows, points at a deleted order in one row per
  thousand (the ``j``-th such row at order ``floor(sqrt(j)) * 1000``, so the missing orders'
  row counts differ: 199, 197, 195, ...), and at an existing order, scattered by a
  multiplicative hash, everywhere else.

Two variants, reported apart: the parent as Parquet (both columns BIGINT: Reflex compares
natively) and the parent as CSV (read as text: Reflex compares the child's values by their
text). Approaches per variant: Reflex (``run_control`` with the parent as the given reference:
DESCRIBE of both files included), five hand-written DuckDB forms (count then sample; one
ANTI JOIN + GROUP BY returning every missing id; the same with the total as a window and
``LIMIT 5``; NOT EXISTS; NOT IN; and, for the CSV parent, NOT IN against the parent's text
cast once to BIGINT where it is the number's own text, which matches exactly what comparing
texts matches), the fastest of which is the reference, and polars (lazy
``scan_parquet`` / ``scan_csv``, anti join, group, sort). Every approach must find the planted
number of orphaned rows and the same 5 worst row counts.

As in ``bench_uniqueness.py``: every run is a fresh subprocess (peak RSS is its own), runs are
interleaved round-robin with the order rotating every round, and median and best wall time and
median CPU time are reported. The machine is shared, so the measurement holds
``/tmp/reflex-bench.lock`` (``flock``; other benchmarks take the same lock) and waits, before
starting and before every round, until the 1-minute load average is below 1.0 (at most
``--max-wait`` seconds at the start, a fifth of it before a round); the loads are recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_row_kinds import REFLEX_TARGET, print_figures, print_load, timed_run
from bench_row_kinds import Approach as RowKindsApproach
from bench_uniqueness import ENGINE_MODULES, cached_snapshot, load_average, run_stats, spawn
from machine import machine_info

ORDERS_PER_LINE = 10  # the parent has one order per this many child rows
DELETED_EVERY = 1000  # order ids that are multiples of this are missing from the parent
NULL_EVERY = 100  # order_id is NULL where line_id % NULL_EVERY == NULL_AT (1 %)
NULL_AT = 17
ORPHAN_EVERY = 1000  # order_id points at a deleted order where line_id % ORPHAN_EVERY == ORPHAN_AT
ORPHAN_AT = 500
SAMPLE_SIZE = 5
GENERATOR_VERSION = 1  # bump when the generated data changes, to invalidate the cache

VARIANTS = ("parquet", "csv")  # the parent's format; the child is always Parquet
LOCK_PATH = Path("/tmp/reflex-bench.lock")
QUIET_LOAD = 1.0  # 1-minute load average under which the 2-core machine counts as quiet


# --- data ---------------------------------------------------------------------------------------


def planted_orphans(rows: int) -> int:
    """Child rows the generator points at a deleted order (none of them is a NULL row)."""
    return len(range(ORPHAN_AT, rows, ORPHAN_EVERY))


def parent_rows(rows: int) -> int:
    """Orders in the parent generated for a child of ``rows`` rows."""
    orders = rows // ORDERS_PER_LINE
    return orders - len(range(0, orders, DELETED_EVERY))


def child_path(data_dir: Path, rows: int) -> Path:
    return data_dir / f"order_lines_{rows}_v{GENERATOR_VERSION}.parquet"


def parent_path(child: Path, variant: str) -> Path:
    """The parent snapshot generated with ``child``, in the variant's format."""
    return child.with_name(child.name.replace("order_lines_", "orders_for_")).with_suffix(
        f".{variant}"
    )


def quoted_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def parent_generator(variant: str) -> Callable[[Path, int], None]:
    """Writes ``orders`` candidate order ids less the deleted ones, in the variant's format
    (DuckDB SQL, no Python loop)."""
    file_format = "csv, HEADER true" if variant == "csv" else "parquet, COMPRESSION zstd"

    def generate(path: Path, orders: int) -> None:
        import duckdb

        sql = f"""
        COPY (
            SELECT
                i AS order_id,
                'cus-' || lpad(((i * 2654435761) % 200000)::VARCHAR, 6, '0') AS customer_id,
                TIMESTAMP '2025-01-01' + to_seconds(i * 30) AS ordered_at
            FROM range({orders}) AS r(i)
            WHERE i % {DELETED_EVERY} <> 0
        ) TO {quoted_path(path)} (FORMAT {file_format})
        """
        with duckdb.connect() as con:
            con.execute(sql)

    return generate


def generate_child(path: Path, rows: int) -> None:
    """The order lines (DuckDB SQL, no Python loop, no RNG).

    An existing order is ``line_id * 2654435761 mod orders`` (an odd multiplier coprime with
    the order count), moved one up when it lands on a deleted order.
    """
    import duckdb

    orders = rows // ORDERS_PER_LINE
    scattered = f"((i * 2654435761) % {orders})"
    sql = f"""
    COPY (
        SELECT
            i AS line_id,
            CASE
                WHEN i % {NULL_EVERY} = {NULL_AT} THEN NULL
                WHEN i % {ORPHAN_EVERY} = {ORPHAN_AT}
                    THEN floor(sqrt(i // {ORPHAN_EVERY}))::BIGINT * {DELETED_EVERY}
                ELSE {scattered} + CASE WHEN {scattered} % {DELETED_EVERY} = 0 THEN 1 ELSE 0 END
            END AS order_id,
            1 + (i * 7919) % 9 AS quantity,
            (((i * 40503) % 100000) / 100.0 + 0.5)::DECIMAL(18, 2) AS amount
        FROM range({rows}) AS r(i)
    ) TO {quoted_path(path)} (FORMAT parquet, COMPRESSION zstd)
    """
    with duckdb.connect() as con:
        con.execute(sql)


def ensure_snapshots(data_dir: Path, rows: int) -> Path:
    """The cached child snapshot for ``rows`` (its parents beside it), generated when missing."""
    child = cached_snapshot(child_path(data_dir, rows), rows, generate_child)
    for variant in VARIANTS:
        path = parent_path(child, variant)
        cached_snapshot(path, rows // ORDERS_PER_LINE, parent_generator(variant))
    return child


# --- approaches ---------------------------------------------------------------------------------
# Each returns (orphaned rows, row counts of the sampled missing ids, worst first).

Answer = tuple[int, list[int]]


def reflex(variant: str) -> Callable[[Path], Answer]:
    """Reflex: the control through run_control, the parent given as its reference."""

    def run(child: Path) -> Answer:
        from reflex_actions.controls.referential_integrity import ReferentialIntegrityControl
        from reflex_actions.executor import ReferenceSnapshot, run_control
        from reflex_actions.snapshots import SnapshotFile

        control = ReferentialIntegrityControl(
            field="order_id",
            references={
                "dataset": "urn:li:dataset:(urn:li:dataPlatform:bench,orders,PROD)",
                "field": "order_id",
            },
        )
        parent = ReferenceSnapshot(SnapshotFile.from_path(parent_path(child, variant)), "given")
        result = run_control(control, child, sample_size=SAMPLE_SIZE, reference=parent)
        return result.violation_count, [row["occurrences"] for row in result.sample]

    return run


@dataclass(frozen=True)
class HandSql:
    """The pieces a hand-written query needs for one variant: how to read the parent and the
    values to compare (text against the CSV's text, natively otherwise)."""

    parent: str
    child_value: str
    parent_value: str

    @classmethod
    def of(cls, variant: str) -> HandSql:
        if variant == "csv":
            return cls(
                "read_csv($parent, header = true, all_varchar = true)",
                "CAST(c.order_id AS VARCHAR)",
                "p.order_id",
            )
        return cls("read_parquet($parent)", "c.order_id", "p.order_id")

    def anti_join(self) -> str:
        return f"""FROM read_parquet($child) AS c
ANTI JOIN {self.parent} AS p ON {self.child_value} = {self.parent_value}
WHERE c.order_id IS NOT NULL"""

    def grouped(self, where: str) -> str:
        """Every missing value with its row count, worst first (``where`` picks the orphans)."""
        return f"""SELECT {self.child_value} AS value, count(*) AS occurrences
{where}
GROUP BY value
ORDER BY occurrences DESC, value"""


def hand_query(shape: str) -> Callable[[str], Callable[[Path], Answer]]:
    """A hand-written DuckDB approach on a fresh in-memory connection.

    ``count_then_sample``: a count, then (because it failed) the 5 worst; ``anti_join_group``,
    ``not_exists``, ``not_in`` and (CSV parent only) ``not_in_typed_parent``: one query
    returning every missing value with its count, summed here; ``top5_window``: one query
    returning the 5 worst with the total as a window.
    """

    def make(variant: str) -> Callable[[Path], Answer]:
        sql = HandSql.of(variant)
        orphans_where = {
            "anti_join_group": sql.anti_join(),
            "not_exists": f"""FROM read_parquet($child) AS c
WHERE c.order_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {sql.parent} AS p WHERE {sql.parent_value} = {sql.child_value})""",
            "not_in": f"""FROM read_parquet($child) AS c
WHERE c.order_id IS NOT NULL
  AND {sql.child_value} NOT IN (
    SELECT {sql.parent_value} FROM {sql.parent} AS p WHERE p.order_id IS NOT NULL
  )""",
            # the parent's text as BIGINT where that is the number's own text ('7', not '007'):
            # the same matches as comparing texts, with one cast per parent row, not per child row
            "not_in_typed_parent": """FROM read_parquet($child) AS c
WHERE c.order_id IS NOT NULL
  AND c.order_id NOT IN (
    SELECT TRY_CAST(p.order_id AS BIGINT)
    FROM read_csv($parent, header = true, all_varchar = true) AS p
    WHERE CAST(TRY_CAST(p.order_id AS BIGINT) AS VARCHAR) = p.order_id
  )""",
        }

        def run(child: Path) -> Answer:
            import duckdb

            params = {"child": str(child), "parent": str(parent_path(child, variant))}
            with duckdb.connect() as con:
                if shape == "count_then_sample":
                    (count,) = con.execute(f"SELECT count(*) {sql.anti_join()}", params).fetchone()
                    sample_sql = f"{sql.grouped(sql.anti_join())} LIMIT {SAMPLE_SIZE}"
                    sample = con.execute(sample_sql, params).fetchall() if count else []
                    return int(count), [int(n) for _, n in sample]
                if shape == "top5_window":
                    top = con.execute(
                        f"""SELECT occurrences, sum(occurrences) OVER () AS total
FROM ({sql.grouped(sql.anti_join())})
ORDER BY occurrences DESC, value
LIMIT {SAMPLE_SIZE}""",
                        params,
                    ).fetchall()
                    return (int(top[0][1]) if top else 0), [int(n) for n, _ in top]
                rows = con.execute(sql.grouped(orphans_where[shape]), params).fetchall()
            return sum(int(n) for _, n in rows), [int(n) for _, n in rows[:SAMPLE_SIZE]]

        return run

    return make


def polars_query(variant: str) -> Callable[[Path], Answer]:
    """polars: lazy scans, the child's non-NULL values anti-joined to the parent's, grouped."""

    def run(child: Path) -> Answer:
        import polars as pl

        values = pl.scan_parquet(child).select("order_id").drop_nulls()
        parent = parent_path(child, variant)
        if variant == "csv":
            parent_values = pl.scan_csv(parent, infer_schema=False).select("order_id")
            values = values.with_columns(pl.col("order_id").cast(pl.String))
        else:
            parent_values = pl.scan_parquet(parent).select("order_id")
        counted = (
            values.join(parent_values, on="order_id", how="anti")
            .group_by("order_id")
            .len("occurrences")
            .sort(["occurrences", "order_id"], descending=[True, False])
            .collect()
        )
        occurrences = counted["occurrences"].to_list()
        return sum(occurrences), occurrences[:SAMPLE_SIZE]

    return run


@dataclass(frozen=True)
class Approach(RowKindsApproach):
    variants: tuple[str, ...] = VARIANTS  # the parent formats it applies to


REFLEX_MODULES = (
    "reflex_actions.executor",
    "reflex_actions.kinds.orphaned_references",
    "reflex_actions.snapshots",
    *ENGINE_MODULES,
)
#: Hand-written shapes and the parent formats each applies to (the typed-parent rewrite only
#: means something when the parent is text).
HAND_SHAPES = {
    "count_then_sample": VARIANTS,
    "anti_join_group": VARIANTS,
    "top5_window": VARIANTS,
    "not_exists": VARIANTS,
    "not_in": VARIANTS,
    "not_in_typed_parent": ("csv",),
}
HAND_DUCKDB = tuple(f"duckdb_{shape}" for shape in HAND_SHAPES)
APPROACHES = {
    approach.name: approach
    for approach in (
        Approach("reflex", REFLEX_MODULES, reflex),
        *(
            Approach(f"duckdb_{shape}", ("duckdb",), hand_query(shape), variants)
            for shape, variants in HAND_SHAPES.items()
        ),
        Approach("polars", ("polars",), polars_query),
    )
}
RUNS = [
    f"{variant}/{approach.name}"
    for variant in VARIANTS
    for approach in APPROACHES.values()
    if variant in approach.variants
]


# --- measuring ----------------------------------------------------------------------------------


def worker(run_name: str, child: Path) -> dict[str, Any]:
    """Run one approach on one variant once in this (fresh) process; report time and memory."""
    variant, name = run_name.split("/")
    (orphans, sample), measured = timed_run(APPROACHES[name], variant, child)
    return {"run": run_name, "orphans": orphans, "sample": sample, **measured}


@contextlib.contextmanager
def bench_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Hold the benchmarks' shared lock (``flock``, as ``flock /tmp/reflex-bench.lock CMD``
    takes it), so two benchmarks never measure at the same time."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_for_quiet(max_wait: float) -> dict[str, float]:
    """Poll until the 1-minute load average is below QUIET_LOAD, for at most ``max_wait``
    seconds; return the load then and how long it took (other people share the 2 cores)."""
    started = time.monotonic()
    while load_average() >= QUIET_LOAD and time.monotonic() - started < max_wait:
        time.sleep(5)
    return {"load": load_average(), "waited_seconds": round(time.monotonic() - started)}


def interleaved_rounds(
    names: list[str],
    repeat: int,
    max_wait: float,
    run: Callable[[str], dict[str, Any]],
    width: int = 32,
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, float]], dict[str, float]]:
    """Under the bench lock, once the machine is quiet: every approach ``repeat`` times, each
    round starting one approach later so none always runs first; each report, the load before
    each round and after the last."""
    reports: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with bench_lock():
        start = wait_for_quiet(max_wait)
        rounds = []
        for round_index in range(repeat):
            rounds.append(start if round_index == 0 else wait_for_quiet(max_wait / 5))
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                report = run(name)
                reports[name].append(report)
                print(
                    f"  round {round_index + 1}/{repeat} {name:<{width}} "
                    f"{report['seconds']:8.2f} s",
                    flush=True,
                )
        load_after = load_average()
    return reports, rounds, load_after


def summarise(run_name: str, reports: list[dict[str, Any]]) -> dict[str, Any]:
    found = {(report["orphans"], tuple(report["sample"])) for report in reports}
    assert len(found) == 1, f"{run_name} gave different answers across runs: {found}"
    orphans, sample = found.pop()
    return {"orphans": orphans, "sample": list(sample), **run_stats(reports)}


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3)


def variant_result(variant: str, summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One variant's figures and ratios (Reflex against the fastest hand query, polars against
    Reflex)."""
    own = {
        name: summaries[f"{variant}/{name}"]
        for name in APPROACHES
        if f"{variant}/{name}" in summaries
    }
    hand_name = min(
        (name for name in HAND_DUCKDB if name in own), key=lambda name: own[name]["seconds"]
    )
    hand, reflex_figures, polars = own[hand_name], own["reflex"], own["polars"]
    reflex_vs_hand = reflex_figures["seconds"] / hand["seconds"]
    figures = ("seconds", "best_seconds", "cpu_seconds")
    return {
        "orphans": reflex_figures["orphans"],
        "sample_occurrences": reflex_figures["sample"],
        "hand_duckdb_query": hand_name,
        "median_seconds": {name: round(s["seconds"], 3) for name, s in own.items()},
        "best_seconds": {name: round(s["best_seconds"], 3) for name, s in own.items()},
        "median_cpu_seconds": {name: round(s["cpu_seconds"], 3) for name, s in own.items()},
        "runs_seconds": {name: s["runs"] for name, s in own.items()},
        "peak_rss_mb": {name: round(s["peak_rss_mb"]) for name, s in own.items()},
        "baseline_rss_mb": {name: round(s["baseline_rss_mb"]) for name, s in own.items()},
        "ratios": {
            **{
                f"reflex_vs_hand_duckdb{suffix}": ratio(reflex_figures[key], hand[key])
                for key, suffix in zip(figures, ("", "_best", "_cpu"), strict=True)
            },
            **{
                f"polars_vs_reflex{suffix}": ratio(polars[key], reflex_figures[key])
                for key, suffix in zip(figures, ("", "_best", "_cpu"), strict=True)
            },
        },
        f"reflex_within_{REFLEX_TARGET:g}x_of_hand_duckdb": reflex_vs_hand <= REFLEX_TARGET,
    }


def benchmark(child: Path, rows: int, repeat: int, max_wait: float) -> dict[str, Any]:
    """Run every approach on both variants ``repeat`` times, interleaved; check they agree."""
    files = [child, *(parent_path(child, variant) for variant in VARIANTS)]
    for path in files:
        path.read_bytes()  # warm the page cache so no approach pays for the first disk read
    reports, rounds, load_after = interleaved_rounds(
        list(RUNS), repeat, max_wait, lambda name: spawn(name, child, __file__)
    )
    summaries = {name: summarise(name, reports[name]) for name in RUNS}

    planted = planted_orphans(rows)
    answers = {name: (s["orphans"], s["sample"]) for name, s in summaries.items()}
    assert {orphans for orphans, _ in answers.values()} == {planted}, (
        f"planted {planted}: {answers}"
    )
    assert len({tuple(sample) for _, sample in answers.values()}) == 1, f"samples: {answers}"
    return {
        "benchmark": "referential_integrity",
        "rows": rows,
        "parent_rows": parent_rows(rows),
        "repeat": repeat,
        "file_mb": {path.name: round(path.stat().st_size / 1024**2, 1) for path in files},
        "variants": {variant: variant_result(variant, summaries) for variant in VARIANTS},
        "load_average": {
            "before": rounds[0]["load"],
            "after": load_after,
            "waited_seconds": rounds[0]["waited_seconds"],
            "rounds": [round_start["load"] for round_start in rounds],
        },
        "machine": machine_info("duckdb", "polars"),
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        f"\nreferential_integrity on {result['rows']:,} child rows against "
        f"{result['parent_rows']:,} parent rows, {result['repeat']} fresh-process runs"
    )
    for variant, figures in result["variants"].items():
        print(
            f"\nparent as {variant}: {figures['orphans']:,} orphaned rows, "
            f"worst missing ids {figures['sample_occurrences']}"
        )
        print_figures(figures, digits=3)
    print_load(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "reflex-bench"
    )
    parser.add_argument("--max-wait", type=float, default=300.0, help="seconds to wait for quiet")
    parser.add_argument("--worker", choices=RUNS, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(worker(args.worker, args.snapshot)))
        return
    child = ensure_snapshots(args.data_dir, args.rows)
    result = benchmark(child, args.rows, args.repeat, args.max_wait)
    print_table(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
