"""Benchmark Reflex's uniqueness control on the spark engine against hand-written Spark SQL.

Usage::

    flock /tmp/reflex-bench.lock python bench/bench_spark.py [--rows 10000000] [--repeat 5]
        [--data-dir /tmp/reflex-bench-spark] [--passing]

The snapshot is bench_uniqueness's (one retry duplicate per thousand rows; with ``--passing``
none), generated once with DuckDB into ``--data-dir``. One local[2] session runs everything:
a JVM costs seconds to start, and a cluster's session is started once and kept. After one
warm-up round (the JIT compiles Spark's code paths on first use), the approaches run in
interleaved rounds, the order rotating every round, and each reports its median wall time.

Reflex is ``run_control`` on a ``FileTarget`` with a ``SparkEngine``: reading the file's
footer for its columns, the counts, and (on a failing snapshot) the five most duplicated keys.
The hand-written queries only count: the best of them is the bar (issue 15: Reflex <= 1.2x).
``spark_count_then_sample`` returns what Reflex returns: the count-distinct query, then (on a
failing snapshot) the five most duplicated keys; its ratio is reported beside the bar's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_uniqueness import ensure_snapshot, expected_duplicates, load_average
from machine import machine_info

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REFLEX_TARGET = 1.2  # Reflex at most this many times the best hand-written Spark SQL query
COUNT_DISTINCT_SQL = (
    "SELECT count(transaction_id) - count(DISTINCT transaction_id) FROM parquet.`{path}`"
)
GROUP_BY_SQL = """
SELECT coalesce(sum(n - 1), 0)
FROM (
    SELECT count(*) AS n FROM parquet.`{path}`
    WHERE transaction_id IS NOT NULL
    GROUP BY transaction_id
    HAVING count(*) > 1
)
"""
HAND = {"spark_count_distinct": COUNT_DISTINCT_SQL, "spark_group_by": GROUP_BY_SQL}
#: The five most duplicated keys, as a team asks for once its count says the check failed.
SAMPLE_SQL = """
SELECT transaction_id, count(*) AS n FROM parquet.`{path}`
WHERE transaction_id IS NOT NULL
GROUP BY transaction_id
HAVING count(*) > 1
ORDER BY n DESC, transaction_id
LIMIT 5
"""


def start_session() -> tuple[SparkSession, float]:
    """The local session every approach shares, and the seconds it took to start."""
    from reflex_actions.engines.spark import session_builder

    started = time.perf_counter()
    session = (
        session_builder()  # a local session: no web UI, no progress bar
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session, time.perf_counter() - started


def approaches(session: SparkSession, path: Path) -> dict[str, Callable[[], int]]:
    """Each approach's run, returning the duplicate rows it found."""
    from reflex_actions.controls.uniqueness import UniquenessControl
    from reflex_actions.engines.base import FileTarget
    from reflex_actions.engines.spark import SparkEngine
    from reflex_actions.executor import run_control

    engine = SparkEngine(session)
    control = UniquenessControl(field="transaction_id")

    def reflex() -> int:
        return run_control(control, FileTarget(path), engine=engine).violation_count

    quoted = str(path).replace("`", "``")

    def hand(sql: str) -> Callable[[], int]:
        return lambda: int(session.sql(sql.format(path=quoted)).collect()[0][0])

    def then_sample(count: Callable[[], int]) -> Callable[[], int]:
        def run() -> int:
            found = count()
            if found:
                session.sql(SAMPLE_SQL.format(path=quoted)).collect()
            return found

        return run

    counts = {name: hand(sql) for name, sql in HAND.items()}
    count_distinct = counts["spark_count_distinct"]
    return {"reflex": reflex, **counts, "spark_count_then_sample": then_sample(count_distinct)}


def benchmark(path: Path, rows: int, repeat: int, passing: bool) -> dict[str, Any]:
    session, start_seconds = start_session()
    runs = approaches(session, path)
    names = list(runs)
    expected = expected_duplicates(rows, passing)
    load_before = load_average()
    walls: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(repeat + 1):  # round 0 warms the JVM up and is not counted
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            found = runs[name]()
            wall = time.perf_counter() - started
            assert found == expected, f"{name} found {found} duplicates, not {expected}"
            if round_index:
                walls[name].append(wall)
            label = f"round {round_index}/{repeat}" if round_index else "warm-up"
            print(f"  {label:<12} {name:<22} {wall:6.2f} s", flush=True)
    session.stop()
    medians = {name: statistics.median(values) for name, values in walls.items()}
    best_hand = min((name for name in names if name != "reflex"), key=medians.__getitem__)
    ratio = medians["reflex"] / medians[best_hand]
    # the same answer as Reflex's (the count, and on a failing snapshot its sample)
    same_answer = medians["reflex"] / medians["spark_count_then_sample"]
    return {
        "rows": rows,
        "passing": passing,
        "duplicates": expected,
        "repeat": repeat,
        "session_start_seconds": round(start_seconds, 2),
        "median_seconds": {name: round(value, 3) for name, value in medians.items()},
        "runs": {name: [round(value, 3) for value in values] for name, values in walls.items()},
        "best_hand": best_hand,
        "reflex_vs_best_hand": round(ratio, 3),
        "reflex_vs_count_then_sample": round(same_answer, 3),
        "target": REFLEX_TARGET,
        "met": ratio <= REFLEX_TARGET,
        "loadavg_before": load_before,
        "loadavg_after": load_average(),
        "machine": machine_info("pyspark", "duckdb", "sqlglot"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/reflex-bench-spark"))
    parser.add_argument("--passing", action="store_true", help="a snapshot with no duplicate")
    args = parser.parse_args()
    path = ensure_snapshot(args.data_dir, args.rows, args.passing)
    result = benchmark(path, args.rows, args.repeat, args.passing)
    print(json.dumps(result, indent=2))
    medians, best = result["median_seconds"], result["best_hand"]
    print(
        f"reflex {medians['reflex']:.2f} s vs {best} {medians[best]:.2f} s: "
        f"{result['reflex_vs_best_hand']}x (target <= {REFLEX_TARGET}x)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
