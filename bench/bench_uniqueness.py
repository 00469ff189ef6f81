"""Benchmark Reflex's uniqueness control against hand-written DuckDB SQL and pandas.

Usage::

    python bench/bench_uniqueness.py [--rows 10000000] [--repeat 3] [--data-dir bench/data]
        [--passing]

With ``--passing`` the snapshot holds no duplicate: the check passes, and Reflex runs only its
counts query (the sample is built only on failure), so it should cost what the cheapest query
costs: ``count(key) - count(DISTINCT key)`` in DuckDB, ``len() - n_unique()`` in polars.

The snapshot is a deterministic Parquet file of card transactions in which one row in a thousand
is a retry duplicate (same transaction_id, created a second or two later). It is generated once
with DuckDB SQL and cached in ``--data-dir``.

Every measured run happens in a fresh subprocess (this script re-invoked with the hidden
``--worker`` flag), so each approach's peak RSS is its own (see ``max_rss_mb``) and no run
inherits another's warm allocator. Runs are interleaved round-robin, rotating the order every
round, so slow patches of a noisy machine spread over all approaches. Wall time and process CPU
time are both reported: CPU time is the steadier figure when the machine is shared.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from machine import machine_info

BENCH_DIR = Path(__file__).resolve().parent
DUPLICATE_EVERY = 1000  # one retry duplicate per this many rows (0.1 %)
GENERATOR_VERSION = 1  # bump when the generated data changes, to invalidate the cache
REFLEX_TARGET = 1.2  # Reflex at most this many times the hand-written DuckDB query
PASSING_TARGET = 1.05  # ... on a passing snapshot (counts only)
PANDAS_TARGET = 5.0  # Reflex at least this many times faster than pandas


# --- data ---------------------------------------------------------------------------------------


def expected_duplicates(rows: int, passing: bool = False) -> int:
    """Number of retry duplicates the generator plants in a snapshot of ``rows`` rows."""
    return 0 if passing else rows // DUPLICATE_EVERY


def snapshot_path(data_dir: Path, rows: int, passing: bool = False) -> Path:
    clean = "_passing" if passing else ""
    return data_dir / f"transactions_{rows}{clean}_v{GENERATOR_VERSION}.parquet"


def generate_passing_snapshot(path: Path, rows: int) -> None:
    """The same transactions without a retry: every transaction_id once."""
    generate_snapshot(path, rows, passing=True)


def generate_snapshot(path: Path, rows: int, passing: bool = False) -> None:
    """Write the snapshot with DuckDB SQL (streams; no Python loop over rows).

    Originals get distinct ids ``txn-`` + 9 digits, scattered over the id space by a bijective
    multiplication modulo 10^9, so the file is not sorted by transaction_id. Retry ``k`` copies
    original ``k * 1000003 mod originals`` (distinct originals, 1000003 being prime) 1.5-2.5 s
    later, so the duplicate-row count is exactly ``expected_duplicates(rows)``. Rows are written
    in created_at order, as an export of a ledger would be.
    """
    import duckdb

    duplicates = expected_duplicates(rows, passing)
    originals = rows - duplicates
    sql = f"""
    COPY (
        WITH originals AS (
            SELECT
                i,
                'txn-' || lpad(((i * 7368787) % 1000000000)::VARCHAR, 9, '0') AS transaction_id,
                'acc-' || lpad(((i * 2654435761) % 250000)::VARCHAR, 6, '0') AS account_id,
                (((i * 40503) % 5000000) / 100.0 + 0.01)::DECIMAL(18, 2) AS amount,
                ['EUR', 'USD', 'GBP', 'CHF', 'JPY'][1 + (i * 7919) % 5] AS currency,
                TIMESTAMP '2025-01-01' + to_milliseconds(i * 3 + (i * 48271) % 3) AS created_at
            FROM range({originals}) AS r(i)
        ),
        retries AS (
            SELECT o.i, o.transaction_id, o.account_id, o.amount, o.currency,
                   o.created_at + to_milliseconds(1500 + k % 1000) AS created_at
            FROM range({duplicates}) AS r(k)
            JOIN originals AS o ON o.i = (k * 1000003) % {originals}
        )
        SELECT transaction_id, account_id, amount, currency, created_at
        FROM (SELECT * FROM originals UNION ALL SELECT * FROM retries)
        ORDER BY created_at, transaction_id
    ) TO '{str(path).replace("'", "''")}' (FORMAT parquet, COMPRESSION zstd)
    """
    with duckdb.connect() as con:
        con.execute(sql)


def ensure_snapshot(data_dir: Path, rows: int, passing: bool = False) -> Path:
    """The cached snapshot for ``rows``, generated first when missing."""
    generate = generate_passing_snapshot if passing else generate_snapshot
    return cached_snapshot(snapshot_path(data_dir, rows, passing), rows, generate)


def cached_snapshot(path: Path, rows: int, generate: Callable[[Path, int], None]) -> Path:
    """``path``, generated (through a partial file, so a killed run leaves no half file) when
    missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        print(f"generating {path} ({rows:,} rows) ...", flush=True)
        started = time.perf_counter()
        generate(partial, rows)
        partial.replace(path)
        print(f"generated in {time.perf_counter() - started:.1f} s", flush=True)
    return path


# --- approaches ---------------------------------------------------------------------------------
# Each returns (duplicate rows found, extra timings). Imports happen before timing starts.

Extras = dict[str, float]


def run_reflex(path: Path) -> tuple[int, Extras]:
    """Reflex: the UniquenessControl through run_control (fresh connection, DESCRIBE included)."""
    from reflex_actions.controls.uniqueness import UniquenessControl
    from reflex_actions.executor import run_control

    result = run_control(UniquenessControl(field="transaction_id"), path)
    return result.violation_count, {}


# NULL keys are not keys, as in Reflex: count(col) and count(DISTINCT col) both skip NULLs.
COUNT_DISTINCT_SQL = """
SELECT count(transaction_id) - count(DISTINCT transaction_id)
FROM read_parquet($path)
"""
GROUP_BY_SQL = """
SELECT coalesce(sum(n - 1), 0)
FROM (
    SELECT count(*) AS n
    FROM read_parquet($path)
    WHERE transaction_id IS NOT NULL
    GROUP BY transaction_id
    HAVING count(*) > 1
)
"""


def hand_duckdb(sql: str) -> Callable[[Path], tuple[int, Extras]]:
    """A hand-written DuckDB query on a fresh in-memory connection."""

    def run(path: Path) -> tuple[int, Extras]:
        import duckdb

        with duckdb.connect() as con:
            row = con.execute(sql, {"path": str(path)}).fetchone()
        assert row is not None
        return int(row[0]), {}

    return run


def run_pandas(path: Path) -> tuple[int, Extras]:
    """pandas: read the key column, then DataFrame.duplicated(); also times duplicated() alone."""
    import pandas as pd

    frame = pd.read_parquet(path, columns=["transaction_id"])
    started = time.perf_counter()
    duplicates = int(frame.duplicated().sum())
    return duplicates, {"duplicated_seconds": time.perf_counter() - started}


def run_polars(path: Path) -> tuple[int, Extras]:
    """polars: ``len() - n_unique()`` of the key over a lazy Parquet scan (no NULL keys here)."""
    import polars as pl

    frame = pl.scan_parquet(path).select(pl.len() - pl.col("transaction_id").n_unique())
    return int(frame.collect().item()), {}


#: What a running action has loaded before it judges a landing (DuckDB, Reflex's engine on it
#: and the dialect it renders in), imported off the clock as the hand-written approaches import
#: duckdb (``run_control`` imports the engine's module on first use: ~4 ms on the clock).
ENGINE_MODULES = ("duckdb", "reflex_actions.engines.duckdb", "sqlglot.dialects.duckdb")


@dataclass(frozen=True)
class Approach:
    name: str
    modules: tuple[str, ...]  # imported before the clock starts
    run: Callable[[Path], tuple[int, Extras]]


APPROACHES = {
    approach.name: approach
    for approach in (
        Approach(
            "reflex",
            ("reflex_actions.executor", "reflex_actions.controls.uniqueness", *ENGINE_MODULES),
            run_reflex,
        ),
        Approach("duckdb_count_distinct", ("duckdb",), hand_duckdb(COUNT_DISTINCT_SQL)),
        Approach("duckdb_group_by", ("duckdb",), hand_duckdb(GROUP_BY_SQL)),
        Approach("pandas", ("pandas", "pyarrow"), run_pandas),
        Approach("polars", ("polars",), run_polars),
    )
}
HAND_DUCKDB = ("duckdb_count_distinct", "duckdb_group_by")


# --- measuring ----------------------------------------------------------------------------------


def max_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB.

    Reads VmHWM from /proc/self/status where there is one: on Linux, ru_maxrss of a freshly
    spawned child starts at its parent's RSS at spawn time (the kernel carries the old memory
    map's high-water mark across exec), which would charge the parent's footprint to every
    worker. VmHWM belongs to the new memory map only. Elsewhere, falls back to ru_maxrss.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 1024**2 if sys.platform == "darwin" else maxrss / 1024  # bytes vs KiB


def worker(name: str, path: Path) -> dict[str, Any]:
    """Run one approach once in this (fresh) process and report time and memory."""
    approach = APPROACHES[name]
    for module in approach.modules:
        importlib.import_module(module)
    baseline_rss = max_rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    duplicates, extras = approach.run(path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "approach": name,
        "duplicates": duplicates,
        "seconds": wall,
        "cpu_seconds": cpu,
        "baseline_rss_mb": baseline_rss,
        "peak_rss_mb": max_rss_mb(),
        **extras,
    }


def spawn(name: str, path: Path, script: str = __file__) -> dict[str, Any]:
    """Run one approach in a fresh interpreter (``script --worker NAME``) and parse its JSON
    report."""
    command = [sys.executable, script, "--worker", name, "--snapshot", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"worker {name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class Summary:
    name: str
    duplicates: int
    seconds: float  # median wall
    best_seconds: float  # fastest wall: noise on a shared machine only ever adds time
    cpu_seconds: float  # median process CPU time (all threads)
    peak_rss_mb: float  # max over runs
    baseline_rss_mb: float  # RSS after imports, before work
    runs: list[float]
    duplicated_seconds: float | None = None  # pandas only: duplicated() without the read


def run_stats(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and best wall, median CPU, peak and baseline RSS, and every wall of the runs."""
    walls = [report["seconds"] for report in reports]
    return {
        "seconds": statistics.median(walls),
        "best_seconds": min(walls),
        "cpu_seconds": statistics.median(report["cpu_seconds"] for report in reports),
        "peak_rss_mb": max(report["peak_rss_mb"] for report in reports),
        "baseline_rss_mb": max(report["baseline_rss_mb"] for report in reports),
        "runs": [round(wall, 3) for wall in walls],
    }


def summarise(name: str, reports: list[dict[str, Any]]) -> Summary:
    found = {report["duplicates"] for report in reports}
    assert len(found) == 1, f"{name} found different duplicate counts across runs: {found}"
    extra = [report["duplicated_seconds"] for report in reports if "duplicated_seconds" in report]
    return Summary(
        name=name,
        duplicates=found.pop(),
        **run_stats(reports),
        duplicated_seconds=statistics.median(extra) if extra else None,
    )


def machine() -> dict[str, Any]:
    return machine_info("duckdb", "pandas", "pyarrow", "polars", "sqlglot")


def load_average() -> float:
    """1-minute load average: above ~0.5 per core, other work is competing for the CPUs."""
    return round(os.getloadavg()[0], 2)


def benchmark(path: Path, rows: int, repeat: int, passing: bool = False) -> dict[str, Any]:
    """Run every approach ``repeat`` times, interleaved, and check they all agree."""
    path.read_bytes()  # warm the page cache so no approach pays for the first disk read
    load_before = load_average()
    names = list(APPROACHES)
    reports: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for round_index in range(repeat):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            report = spawn(name, path)
            reports[name].append(report)
            seconds = report["seconds"]
            print(f"  round {round_index + 1}/{repeat} {name:<22} {seconds:6.2f} s", flush=True)
    summaries = {name: summarise(name, reports[name]) for name in names}

    expected = expected_duplicates(rows, passing)
    found = {name: summary.duplicates for name, summary in summaries.items()}
    assert set(found.values()) == {expected}, f"expected {expected} duplicates everywhere: {found}"

    reflex = summaries["reflex"]
    hand = min((summaries[name] for name in HAND_DUCKDB), key=lambda summary: summary.seconds)
    pandas = summaries["pandas"]
    polars = summaries["polars"]
    reflex_vs_hand = reflex.seconds / hand.seconds
    pandas_vs_reflex = pandas.seconds / reflex.seconds
    target = PASSING_TARGET if passing else REFLEX_TARGET
    return {
        "benchmark": "uniqueness, passing" if passing else "uniqueness",
        "rows": rows,
        "duplicates": expected,
        "repeat": repeat,
        "snapshot_mb": round(path.stat().st_size / 1024**2, 1),
        "hand_duckdb_query": hand.name,
        "median_seconds": {name: round(s.seconds, 3) for name, s in summaries.items()},
        "best_seconds": {name: round(s.best_seconds, 3) for name, s in summaries.items()},
        "median_cpu_seconds": {name: round(s.cpu_seconds, 3) for name, s in summaries.items()},
        "pandas_duplicated_only_seconds": round(pandas.duplicated_seconds or 0.0, 3),
        "runs_seconds": {name: s.runs for name, s in summaries.items()},
        "ratios": {
            "reflex_vs_hand_duckdb": round(reflex_vs_hand, 3),
            "pandas_vs_reflex": round(pandas_vs_reflex, 3),
            "reflex_vs_hand_duckdb_best": round(reflex.best_seconds / hand.best_seconds, 3),
            "pandas_vs_reflex_best": round(pandas.best_seconds / reflex.best_seconds, 3),
            "reflex_vs_hand_duckdb_cpu": round(reflex.cpu_seconds / hand.cpu_seconds, 3),
            "pandas_vs_reflex_cpu": round(pandas.cpu_seconds / reflex.cpu_seconds, 3),
            "reflex_vs_polars": round(reflex.seconds / polars.seconds, 3),
            "reflex_vs_polars_best": round(reflex.best_seconds / polars.best_seconds, 3),
            "reflex_vs_polars_cpu": round(reflex.cpu_seconds / polars.cpu_seconds, 3),
        },
        "targets_met": {
            f"reflex_within_{target:g}x_of_hand_duckdb": reflex_vs_hand <= target,
            f"reflex_{PANDAS_TARGET:g}x_faster_than_pandas": pandas_vs_reflex >= PANDAS_TARGET,
        },
        "peak_rss_mb": {name: round(s.peak_rss_mb) for name, s in summaries.items()},
        "baseline_rss_mb": {name: round(s.baseline_rss_mb) for name, s in summaries.items()},
        "load_average": {"before": load_before, "after": load_average()},
        "machine": machine(),
    }


def print_table(result: dict[str, Any]) -> None:
    print(
        f"\nuniqueness on {result['rows']:,} rows, {result['duplicates']:,} duplicates, "
        f"{result['repeat']} fresh-process runs each"
    )
    header = ("approach", "median s", "best s", "cpu s", "peak RSS MB", "base RSS MB")
    print(f"{header[0]:<25}" + "".join(f"{column:>12}" for column in header[1:]))
    for name in result["median_seconds"]:
        figures = (
            f"{result['median_seconds'][name]:.2f}",
            f"{result['best_seconds'][name]:.2f}",
            f"{result['median_cpu_seconds'][name]:.2f}",
            result["peak_rss_mb"][name],
            result["baseline_rss_mb"][name],
        )
        print(f"{name:<25}" + "".join(f"{figure:>12}" for figure in figures))
    print(f"{'pandas duplicated() only':<25}{result['pandas_duplicated_only_seconds']:>12.2f}")
    ratios = result["ratios"]
    for label, key in (
        (f"reflex / {result['hand_duckdb_query']}", "reflex_vs_hand_duckdb"),
        ("pandas / reflex", "pandas_vs_reflex"),
        ("reflex / polars", "reflex_vs_polars"),
    ):
        print(
            f"{label}: {ratios[key]:.2f}x median, {ratios[key + '_best']:.2f}x best, "
            f"{ratios[key + '_cpu']:.2f}x cpu"
        )
    for target, met in result["targets_met"].items():
        print(f"target {target} (median wall): {'met' if met else 'MISSED'}")
    load, cores = result["load_average"], result["machine"]["nproc"] or 1
    if max(load.values()) > cores / 2:
        print(f"warning: load average {load} on {cores} cores, wall times are noisy")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=BENCH_DIR / "data")
    parser.add_argument("--passing", action="store_true", help="a snapshot with no duplicate")
    parser.add_argument("--worker", choices=list(APPROACHES), help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(worker(args.worker, args.snapshot)))
        return
    path = ensure_snapshot(args.data_dir, args.rows, args.passing)
    result = benchmark(path, args.rows, args.repeat, args.passing)
    print_table(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
