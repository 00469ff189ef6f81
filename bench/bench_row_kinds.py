"""Benchmark Reflex's row-level value controls against hand-written DuckDB SQL and polars.

Usage::

    python bench/bench_row_kinds.py [--rows 10000000] [--repeat 3] [--data-dir /tmp/reflex-bench]

Three controls, each on the same deterministic Parquet snapshot of payments (generated once with
DuckDB SQL and cached in ``--data-dir``, a temp folder by default):

- ``not_null``: ``account_id`` is NULL in one row in a thousand (sample: the 5 smallest ids);
- ``accepted_values``: ``currency`` holds a few unknown codes among EUR/USD/GBP/CHF/JPY;
- ``value_range``: ``amount`` DECIMAL(18,2) must lie in [0, 50000]; a few rows are negative.

Every check fails on this data, so each approach counts the violations and also fetches the
sample a steward would see, as Reflex's one query does: a hand-written approach is either a
count query followed by a sample query (what a team writes for "count, and show me some when
it fails"), or one query returning the violating rows or groups, counted in Python. The faster
of the two is the reference. polars runs the one-query form on a lazy ``scan_parquet``.

As in ``bench_uniqueness.py``: every run is a fresh subprocess (peak RSS is its own), runs are
interleaved round-robin with the order rotating every round, and median and best wall time and
median CPU time are reported. Every approach must find the planted number of violations.
"""

from __future__ import annotations

import argparse
import importlib
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_uniqueness import (
    ENGINE_MODULES,
    cached_snapshot,
    load_average,
    max_rss_mb,
    run_stats,
    spawn,
)
from machine import machine_info

NULL_EVERY = 1000  # account_id is NULL in one row per this many (0.1 %)
UNKNOWN_CURRENCY_EVERY = 20011  # an unknown currency code in one row per this many
NEGATIVE_EVERY = 5003  # a negative amount in one row per this many
KNOWN_CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")
UNKNOWN_CURRENCIES = ("XXX", "EURO", "usd")
MAX_AMOUNT = 50_000
SAMPLE_SIZE = 5
GENERATOR_VERSION = 1  # bump when the generated data changes, to invalidate the cache
REFLEX_TARGET = 1.2  # Reflex at most this many times the fastest hand-written DuckDB query
CONTROLS = ("not_null", "accepted_values", "value_range")


# --- data ---------------------------------------------------------------------------------------


def planted_violations(rows: int) -> dict[str, int]:
    """Rows the generator makes violate each control in a snapshot of ``rows`` rows."""
    return {
        "not_null": len(range(7, rows, NULL_EVERY)),
        "accepted_values": len(range(0, rows, UNKNOWN_CURRENCY_EVERY)),
        "value_range": len(range(0, rows, NEGATIVE_EVERY)),
    }


def snapshot_path(data_dir: Path, rows: int) -> Path:
    return data_dir / f"payments_{rows}_v{GENERATOR_VERSION}.parquet"


def generate_snapshot(path: Path, rows: int) -> None:
    """Write the snapshot with DuckDB SQL (streams; no Python loop over rows, no RNG).

    ``id`` counts up (an export in id order); ``account_id`` spreads over 250,000 accounts by a
    multiplicative hash and is NULL where ``i % 1000 = 7``; ``currency`` cycles through five
    known codes by another hash, with an unknown code every 20,011th row; ``amount`` is 0.01 to
    50,000.00, negated every 5,003rd row (a refund booked with the wrong sign).
    """
    import duckdb

    known = ", ".join(f"'{code}'" for code in KNOWN_CURRENCIES)
    unknown = ", ".join(f"'{code}'" for code in UNKNOWN_CURRENCIES)
    sql = f"""
    COPY (
        SELECT
            i AS id,
            CASE WHEN i % {NULL_EVERY} = 7 THEN NULL
                ELSE 'acc-' || lpad(((i * 2654435761) % 250000)::VARCHAR, 6, '0')
            END AS account_id,
            CASE WHEN i % {UNKNOWN_CURRENCY_EVERY} = 0
                THEN [{unknown}][1 + (i // {UNKNOWN_CURRENCY_EVERY}) % {len(UNKNOWN_CURRENCIES)}]
                ELSE [{known}][1 + (i * 7919) % {len(KNOWN_CURRENCIES)}]
            END AS currency,
            (CASE WHEN i % {NEGATIVE_EVERY} = 0 THEN -1 ELSE 1 END
                * (((i * 40503) % {MAX_AMOUNT * 100}) / 100.0 + 0.01))::DECIMAL(18, 2) AS amount,
            TIMESTAMP '2025-01-01' + to_milliseconds(i * 3) AS created_at
        FROM range({rows}) AS r(i)
    ) TO '{str(path).replace("'", "''")}' (FORMAT parquet, COMPRESSION zstd)
    """
    with duckdb.connect() as con:
        con.execute(sql)


def ensure_snapshot(data_dir: Path, rows: int) -> Path:
    """The cached snapshot for ``rows``, generated first when missing."""
    return cached_snapshot(snapshot_path(data_dir, rows), rows, generate_snapshot)


# --- approaches ---------------------------------------------------------------------------------
# Each returns (violations found, sample size). Imports happen before timing starts.

Answer = tuple[int, int]


def reflex_control(control: str) -> Any:
    """The Reflex control for ``control``, as a lesson would declare it."""
    from reflex_actions.controls.not_null import NotNullControl
    from reflex_actions.controls.values import AcceptedValuesControl, ValueRangeControl

    if control == "not_null":
        return NotNullControl(field="account_id", key=["id"])
    if control == "accepted_values":
        return AcceptedValuesControl(field="currency", values=list(KNOWN_CURRENCIES))
    return ValueRangeControl(field="amount", min=0, max=MAX_AMOUNT)


def reflex(control: str) -> Callable[[Path], Answer]:
    """Reflex: the control through run_control (fresh connection, DESCRIBE included)."""

    def run(path: Path) -> Answer:
        from reflex_actions.executor import run_control

        result = run_control(reflex_control(control), path, sample_size=SAMPLE_SIZE)
        return result.violation_count, len(result.sample)

    return run


#: What makes a row violate each control, in plain DuckDB SQL on the column's own type.
VIOLATION = {
    "not_null": "account_id IS NULL",
    "accepted_values": f"currency NOT IN ({', '.join(repr(c) for c in KNOWN_CURRENCIES)})",
    "value_range": f"(amount < 0 OR amount > {MAX_AMOUNT})",
}
#: The sample each control shows: ids of NULL rows; invalid values, most frequent first.
SAMPLE_SQL = {
    "not_null": f"""
SELECT id FROM read_parquet($path) WHERE {VIOLATION["not_null"]} ORDER BY id LIMIT {SAMPLE_SIZE}
""",
    **{
        control: f"""
SELECT {column}, count(*) AS occurrences
FROM read_parquet($path)
WHERE {VIOLATION[control]}
GROUP BY {column}
ORDER BY occurrences DESC, {column}
LIMIT {SAMPLE_SIZE}
"""
        for control, column in (("accepted_values", "currency"), ("value_range", "amount"))
    },
}
#: One query returning every violating row (not_null) or value with its count.
VIOLATIONS_SQL = {
    "not_null": f"SELECT id, 1 FROM read_parquet($path) WHERE {VIOLATION['not_null']} ORDER BY id",
    **{
        control: f"""
SELECT {column}, count(*) AS occurrences
FROM read_parquet($path)
WHERE {VIOLATION[control]}
GROUP BY {column}
ORDER BY occurrences DESC, {column}
"""
        for control, column in (("accepted_values", "currency"), ("value_range", "amount"))
    },
}


def duckdb_count_then_sample(control: str) -> Callable[[Path], Answer]:
    """Hand-written DuckDB: a count query, then the sample query because the check failed."""

    def run(path: Path) -> Answer:
        import duckdb

        params = {"path": str(path)}
        count_sql = f"SELECT count(*) FROM read_parquet($path) WHERE {VIOLATION[control]}"
        with duckdb.connect() as con:
            row = con.execute(count_sql, params).fetchone()
            assert row is not None
            violations = int(row[0])
            sample = con.execute(SAMPLE_SQL[control], params).fetchall() if violations else []
        return violations, len(sample)

    return run


def duckdb_one_query(control: str) -> Callable[[Path], Answer]:
    """Hand-written DuckDB: one query returning the violating rows or values, counted here."""

    def run(path: Path) -> Answer:
        import duckdb

        with duckdb.connect() as con:
            rows = con.execute(VIOLATIONS_SQL[control], {"path": str(path)}).fetchall()
        return sum(int(occurrences) for _, occurrences in rows), len(rows[:SAMPLE_SIZE])

    return run


def polars_one_query(control: str) -> Callable[[Path], Answer]:
    """polars: a lazy scan_parquet filtered to the violations (grouped by value), collected."""

    def run(path: Path) -> Answer:
        import polars as pl

        frame = pl.scan_parquet(path)
        if control == "not_null":
            ids = frame.filter(pl.col("account_id").is_null()).select("id").sort("id").collect()
            return ids.height, min(ids.height, SAMPLE_SIZE)
        if control == "accepted_values":
            column, invalid = "currency", ~pl.col("currency").is_in(list(KNOWN_CURRENCIES))
        else:
            column = "amount"
            invalid = (pl.col("amount") < 0) | (pl.col("amount") > MAX_AMOUNT)
        counted = (
            frame.filter(invalid)
            .group_by(column)
            .len("occurrences")
            .sort(["occurrences", column], descending=[True, False])
            .collect()
        )
        return int(counted["occurrences"].sum()), min(counted.height, SAMPLE_SIZE)

    return run


@dataclass(frozen=True)
class Approach:
    name: str
    modules: tuple[str, ...]  # imported before the clock starts
    make: Callable[[str], Callable[[Path], Answer]]


REFLEX_MODULES = (
    "reflex_actions.executor",
    "reflex_actions.kinds.missing_values",
    "reflex_actions.kinds.invalid_values",
    *ENGINE_MODULES,
)
APPROACHES = {
    approach.name: approach
    for approach in (
        Approach("reflex", REFLEX_MODULES, reflex),
        Approach("duckdb_count_then_sample", ("duckdb",), duckdb_count_then_sample),
        Approach("duckdb_one_query", ("duckdb",), duckdb_one_query),
        Approach("polars", ("polars",), polars_one_query),
    )
}
HAND_DUCKDB = ("duckdb_count_then_sample", "duckdb_one_query")
RUNS = [f"{control}/{name}" for control in CONTROLS for name in APPROACHES]


# --- measuring ----------------------------------------------------------------------------------


def timed_run(approach: Any, case: str, path: Path) -> tuple[Any, dict[str, float]]:
    """Run ``approach`` (its ``modules`` imported first, off the clock) on ``case`` once in
    this fresh process: its answer, and the wall and CPU time and memory it took."""
    for module in approach.modules:
        importlib.import_module(module)
    run = approach.make(case)
    baseline_rss = max_rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    answer = run(path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return answer, {
        "seconds": wall,
        "cpu_seconds": cpu,
        "baseline_rss_mb": baseline_rss,
        "peak_rss_mb": max_rss_mb(),
    }


def worker(run_name: str, path: Path) -> dict[str, Any]:
    """Run one approach on one control once in this (fresh) process; report time and memory."""
    control, name = run_name.split("/")
    (violations, sampled), measured = timed_run(APPROACHES[name], control, path)
    return {"run": run_name, "violations": violations, "sampled": sampled, **measured}


@dataclass
class Summary:
    violations: int
    seconds: float  # median wall
    best_seconds: float  # fastest wall: noise on a shared machine only ever adds time
    cpu_seconds: float  # median process CPU time (all threads)
    peak_rss_mb: float  # max over runs
    baseline_rss_mb: float  # RSS after imports, before work
    runs: list[float]


def summarise(run_name: str, reports: list[dict[str, Any]]) -> Summary:
    found = {report["violations"] for report in reports}
    assert len(found) == 1, f"{run_name} found different violation counts across runs: {found}"
    return Summary(violations=found.pop(), **run_stats(reports))


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3)


def control_result(control: str, summaries: dict[str, Summary]) -> dict[str, Any]:
    """One control's figures and ratios (Reflex and polars against the fastest hand query)."""
    own = {name: summaries[f"{control}/{name}"] for name in APPROACHES}
    hand_name = min(HAND_DUCKDB, key=lambda name: own[name].seconds)
    hand, reflex_summary, polars = own[hand_name], own["reflex"], own["polars"]
    reflex_vs_hand = reflex_summary.seconds / hand.seconds
    return {
        "violations": reflex_summary.violations,
        "hand_duckdb_query": hand_name,
        "median_seconds": {name: round(s.seconds, 3) for name, s in own.items()},
        "best_seconds": {name: round(s.best_seconds, 3) for name, s in own.items()},
        "median_cpu_seconds": {name: round(s.cpu_seconds, 3) for name, s in own.items()},
        "runs_seconds": {name: s.runs for name, s in own.items()},
        "peak_rss_mb": {name: round(s.peak_rss_mb) for name, s in own.items()},
        "baseline_rss_mb": {name: round(s.baseline_rss_mb) for name, s in own.items()},
        "ratios": {
            "reflex_vs_hand_duckdb": round(reflex_vs_hand, 3),
            "reflex_vs_hand_duckdb_best": ratio(reflex_summary.best_seconds, hand.best_seconds),
            "reflex_vs_hand_duckdb_cpu": ratio(reflex_summary.cpu_seconds, hand.cpu_seconds),
            "polars_vs_reflex": ratio(polars.seconds, reflex_summary.seconds),
            "polars_vs_reflex_best": ratio(polars.best_seconds, reflex_summary.best_seconds),
            "polars_vs_reflex_cpu": ratio(polars.cpu_seconds, reflex_summary.cpu_seconds),
        },
        f"reflex_within_{REFLEX_TARGET:g}x_of_hand_duckdb": reflex_vs_hand <= REFLEX_TARGET,
    }


def benchmark(path: Path, rows: int, repeat: int) -> dict[str, Any]:
    """Run every approach on every control ``repeat`` times, interleaved; check they agree."""
    path.read_bytes()  # warm the page cache so no approach pays for the first disk read
    load_before = load_average()
    reports: dict[str, list[dict[str, Any]]] = {name: [] for name in RUNS}
    for round_index in range(repeat):
        shift = round_index % len(RUNS)
        for run_name in RUNS[shift:] + RUNS[:shift]:
            report = spawn(run_name, path, __file__)
            reports[run_name].append(report)
            seconds = report["seconds"]
            print(f"  round {round_index + 1}/{repeat} {run_name:<40} {seconds:6.2f} s", flush=True)
    summaries = {name: summarise(name, reports[name]) for name in RUNS}

    planted = planted_violations(rows)
    for control in CONTROLS:
        own = [f"{control}/{name}" for name in APPROACHES]
        found = {name: summaries[name].violations for name in own}
        assert set(found.values()) == {planted[control]}, f"planted {planted[control]}: {found}"
        sampled = {name: {report["sampled"] for report in reports[name]} for name in own}
        assert len(set.union(*sampled.values())) == 1, f"{control} samples differ: {sampled}"
    return {
        "benchmark": "row_kinds",
        "rows": rows,
        "repeat": repeat,
        "snapshot_mb": round(path.stat().st_size / 1024**2, 1),
        "controls": {control: control_result(control, summaries) for control in CONTROLS},
        "load_average": {"before": load_before, "after": load_average()},
        "machine": machine_info("duckdb", "polars"),
    }


def print_figures(figures: dict[str, Any], digits: int = 2) -> None:
    """One control's (or variant's) table of approaches, its ratios and its verdict."""
    header = ("median s", "best s", "cpu s", "peak RSS MB", "base RSS MB")
    print(f"{'approach':<28}" + "".join(f"{column:>12}" for column in header))
    for name in figures["median_seconds"]:
        cells = (
            f"{figures['median_seconds'][name]:.{digits}f}",
            f"{figures['best_seconds'][name]:.{digits}f}",
            f"{figures['median_cpu_seconds'][name]:.{digits}f}",
            figures["peak_rss_mb"][name],
            figures["baseline_rss_mb"][name],
        )
        print(f"{name:<28}" + "".join(f"{cell:>12}" for cell in cells))
    ratios = figures["ratios"]
    for label, key in (
        (f"reflex / {figures['hand_duckdb_query']}", "reflex_vs_hand_duckdb"),
        ("polars / reflex", "polars_vs_reflex"),
    ):
        print(
            f"{label}: {ratios[key]:.2f}x median, {ratios[key + '_best']:.2f}x best, "
            f"{ratios[key + '_cpu']:.2f}x cpu"
        )
    met = figures[f"reflex_within_{REFLEX_TARGET:g}x_of_hand_duckdb"]
    verdict = "met" if met else "MISSED"
    print(f"target reflex within {REFLEX_TARGET:g}x (median wall): {verdict}")


def print_table(result: dict[str, Any]) -> None:
    print(f"\nrow-level controls on {result['rows']:,} rows, {result['repeat']} fresh-process runs")
    for control, figures in result["controls"].items():
        print(f"\n{control}: {figures['violations']:,} violations")
        print_figures(figures)
    print_load(result)


def print_load(result: dict[str, Any]) -> None:
    """The load average around the run, with a warning when it makes wall times noisy."""
    load, cores = result["load_average"], result["machine"]["nproc"] or 1
    print(f"\nload average {load} on {cores} cores")
    readings = [load["before"], load["after"], *load.get("rounds", [])]
    if max(readings) > cores / 2:
        print("warning: load average high, wall times are noisy")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "reflex-bench"
    )
    parser.add_argument("--worker", choices=RUNS, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(worker(args.worker, args.snapshot)))
        return
    path = ensure_snapshot(args.data_dir, args.rows)
    result = benchmark(path, args.rows, args.repeat)
    print_table(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
