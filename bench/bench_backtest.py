"""Benchmark the backtester against a hand-written per-file DuckDB loop and the old single query.

Usage::

    python bench/bench_backtest.py [--snapshots 365] [--rows 100000] [--repeat 3]
        [--approaches reflex,loop,single] [--max-wait 300] [--with-imports]

The history is a folder of ``--snapshots`` daily Parquet snapshots of ``--rows`` rows each
(transaction ids unique per day, retry duplicates planted in every 30th snapshot and labelled in
``labels.yaml``), generated once with DuckDB and cached in ``bench/data``.

Measured in the same run, each in a fresh subprocess so its peak RSS is its own, interleaved
with the order rotating every round:

- ``reflex``: ``backtest(UniquenessControl(field="transaction_id"), [load_history(dir)])`` —
  schema checks of every file, one query per snapshot (several at once), metrics.
- ``loop``: the per-snapshot duplicate count written by hand, one DuckDB query per file in a
  plain loop on one connection with DuckDB's defaults.
- ``single``: the query the backtester ran before (issue 15): the uniqueness control compiled on
  every file as one relation partitioned by file, one ``GROUP BY`` with a 768 MB memory limit
  and a spill folder.

The machine is shared: the run holds ``/tmp/reflex-bench.lock`` (as
``bench_referential_integrity.py`` does) and waits for a quiet load average before it starts
and before every round; the loads are recorded. Targets (issue 15): Reflex <= 1.0x the loop,
peak RSS <= 250 MB, time linear in the number of snapshots. Module imports are off the clock
for every approach (the loop's duckdb, Reflex's backtester and sqlglot's DuckDB dialect), as
an action has them loaded; ``--with-imports`` times a fresh process's first backtest, imports
included.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
from bench_referential_integrity import bench_lock, wait_for_quiet
from bench_uniqueness import load_average
from machine import machine_info

BENCH_DIR = Path(__file__).resolve().parent
FAILURE_EVERY = 30
RATIO_TARGET = 1.0
MEMORY_TARGET_MB = 250


def history_dir(data_dir: Path, snapshots: int, rows: int) -> Path:
    return data_dir / f"history_{snapshots}x{rows}"


def generate(folder: Path, snapshots: int, rows: int) -> None:
    """One Parquet file per day; every FAILURE_EVERY-th day repeats 0.1 % of its rows."""
    if (folder / "labels.yaml").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    failures = []
    for day in range(snapshots):
        snapshot_id = f"day-{day:04d}"
        duplicates = rows // 1000 if day % FAILURE_EVERY == FAILURE_EVERY - 1 else 0
        if duplicates:
            failures.append(snapshot_id)
        con.execute(
            f"""COPY (
                SELECT 'txn-' || lpad(CAST((i * 7919 + {day}) % {rows * 10} AS VARCHAR), 9, '0')
                           || '-' || {day} AS transaction_id,
                       i % 5000 AS account_id,
                       round(random() * 1000, 2) AS amount,
                       'EUR' AS currency
                FROM range({rows}) t(i)
                UNION ALL
                SELECT 'txn-' || lpad(CAST((i * 7919 + {day}) % {rows * 10} AS VARCHAR), 9, '0')
                           || '-' || {day}, i % 5000, 1.0, 'EUR'
                FROM range({duplicates}) t(i)
            ) TO '{folder / (snapshot_id + ".parquet")}' (FORMAT parquet)"""
        )
    (folder / "labels.yaml").write_text(
        "failures:\n" + "".join(f"  - '{sid}'\n" for sid in failures)
    )


def run_reflex(folder: Path, workers: int | None) -> dict[str, object]:
    from reflex_actions.backtest import backtest, load_history
    from reflex_actions.backtest.engine import DEFAULT_WORKERS
    from reflex_actions.controls.uniqueness import UniquenessControl

    report = backtest(
        UniquenessControl(field="transaction_id"),
        [load_history(folder)],
        workers=workers or DEFAULT_WORKERS,
    )
    return {
        "flagged": sum(1 for outcome in report.per_snapshot if outcome.flagged),
        "precision": report.precision,
        "recall": report.recall,
        "snapshots": report.coverage.snapshots,
    }


def snapshot_files(folder: Path) -> list[str]:
    return sorted(str(path) for path in folder.glob("*.parquet"))


def run_loop(folder: Path, workers: int | None) -> dict[str, object]:
    """The plain loop: one duplicate count per file, one after the other."""
    con = duckdb.connect()
    duplicates = [
        con.execute(
            """SELECT coalesce(sum(n - 1), 0) FROM (
                   SELECT count(*) AS n FROM read_parquet($file) GROUP BY transaction_id
               )""",
            {"file": file},
        ).fetchone()[0]
        for file in snapshot_files(folder)
    ]
    return {"flagged": sum(1 for n in duplicates if n > 0), "snapshots": len(duplicates)}


def run_single(folder: Path, workers: int | None) -> dict[str, object]:
    """The backtester's query before issue 15: every file as one partitioned relation."""
    from dataclasses import replace

    from reflex_actions.controls.uniqueness import UniquenessControl
    from reflex_actions.snapshots import SnapshotFile, files_relation

    control = UniquenessControl(field="transaction_id")
    snapshots = [SnapshotFile.from_path(file) for file in snapshot_files(folder)]
    with tempfile.TemporaryDirectory(prefix="reflex-bench-spill-") as spill_dir:
        con = duckdb.connect(
            config={
                "memory_limit": "768MB",
                "temp_directory": spill_dir,
                "preserve_insertion_order": False,
            }
        )
        relation = files_relation(snapshots, control.required_columns())
        types = {"transaction_id": "VARCHAR"}
        query = control.compile(replace(relation, types=types), 3)
        rows = con.execute(query.sql, query.params).fetchall()
    flagged = sum(
        1 for _, scanned, violations, *_ in rows if violations > control.allowed_violations(scanned)
    )
    return {"flagged": flagged, "snapshots": len(rows)}


#: approach -> run(history folder, Reflex's workers or None for its default)
APPROACHES: dict[str, Callable[[Path, int | None], dict[str, object]]] = {
    "reflex": run_reflex,
    "loop": run_loop,
    "single": run_single,
}


def worker(approach: str, folder: Path, workers: int | None, with_imports: bool) -> None:
    # Imports are not what is measured (the loop imports duckdb at the top of this file): the
    # backtester and sqlglot's DuckDB dialect, which Reflex imports where first used, load
    # off the clock; ``with_imports`` measures a fresh process's first backtest instead.
    if not with_imports:
        from sqlglot.dialects.duckdb import DuckDB  # noqa: F401

        import reflex_actions.backtest.engine  # noqa: F401

    started = time.perf_counter()
    result = APPROACHES[approach](folder, workers)
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"approach": approach, "seconds": elapsed, "peak_mb": peak_mb, **result}))


def measure(
    approach: str, folder: Path, workers: int | None, with_imports: bool
) -> dict[str, object]:
    command = [sys.executable, __file__, "--worker", approach, "--folder", str(folder)]
    output = subprocess.run(
        command
        + (["--workers", str(workers)] if workers else [])
        + (["--with-imports"] if with_imports else []),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=365)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--approaches", default=",".join(APPROACHES))
    parser.add_argument("--max-wait", type=float, default=300)
    parser.add_argument("--workers", type=int, help="Reflex's snapshots at once (its default)")
    parser.add_argument("--data-dir", type=Path, default=BENCH_DIR / "data")
    parser.add_argument("--worker", choices=list(APPROACHES))
    parser.add_argument("--folder", type=Path)
    parser.add_argument(
        "--with-imports",
        action="store_true",
        help="time Reflex's module imports too (a fresh process's first backtest)",
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.folder, args.workers, args.with_imports)
        return
    approaches = args.approaches.split(",")
    unknown = sorted(set(approaches) - set(APPROACHES))
    if unknown:
        parser.error(f"unknown approach(es) {unknown}; expected some of {list(APPROACHES)}")
    folder = history_dir(args.data_dir, args.snapshots, args.rows)
    started = time.perf_counter()
    generate(folder, args.snapshots, args.rows)
    print(f"history: {folder} ({time.perf_counter() - started:.1f} s to prepare)")
    runs: dict[str, list[dict[str, object]]] = {approach: [] for approach in approaches}
    with bench_lock():
        start = wait_for_quiet(args.max_wait)
        rounds = []
        for round_number in range(args.repeat):
            rounds.append(start if round_number == 0 else wait_for_quiet(args.max_wait / 5))
            shift = round_number % len(approaches)
            for approach in approaches[shift:] + approaches[:shift]:
                runs[approach].append(measure(approach, folder, args.workers, args.with_imports))
                seconds = runs[approach][-1]["seconds"]
                print(f"  round {round_number + 1}/{args.repeat} {approach:<8} {seconds:7.2f} s")
        load_after = load_average()
    summary = {
        approach: {
            "median_s": round(statistics.median(float(r["seconds"]) for r in results), 3),
            "runs_s": [round(float(r["seconds"]), 3) for r in results],
            "peak_mb": round(max(float(r["peak_mb"]) for r in results), 1),
            "flagged": results[0]["flagged"],
        }
        for approach, results in runs.items()
    }
    expected = args.snapshots // FAILURE_EVERY
    assert {figures["flagged"] for figures in summary.values()} == {expected}, summary
    print(f"{'approach':8} {'median s':>9} {'peak MB':>8} {'flagged':>8}")
    for approach, figures in summary.items():
        median, peak, flagged = figures["median_s"], figures["peak_mb"], figures["flagged"]
        print(f"{approach:8} {median:9.2f} {peak:8.0f} {flagged:8}")
    ratios = {
        f"reflex_vs_{other}": round(summary["reflex"]["median_s"] / summary[other]["median_s"], 3)
        for other in summary
        if other != "reflex" and "reflex" in summary
    }
    if "reflex" in summary:
        print(
            f"{ratios} (target reflex_vs_loop <= {RATIO_TARGET}); reflex peak "
            f"{summary['reflex']['peak_mb']:.0f} MB (target <= {MEMORY_TARGET_MB})"
        )
    print(
        json.dumps(
            {
                "snapshots": args.snapshots,
                "rows_per_snapshot": args.rows,
                "repeat": args.repeat,
                "reflex_workers": args.workers or "default",
                "with_imports": args.with_imports,
                "summary": summary,
                "ratios": ratios,
                "reflex_precision": runs["reflex"][0]["precision"] if "reflex" in runs else None,
                "reflex_recall": runs["reflex"][0]["recall"] if "reflex" in runs else None,
                "load_average": {
                    "before": start["load"],
                    "after": load_after,
                    "waited_seconds": start["waited_seconds"],
                    "rounds": [round_start["load"] for round_start in rounds],
                },
                "machine": machine_info("duckdb"),
            }
        )
    )


if __name__ == "__main__":
    main()
