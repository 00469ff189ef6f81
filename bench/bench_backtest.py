"""Benchmark the backtester against one hand-written DuckDB scan of the same history.

Usage::

    python bench/bench_backtest.py [--snapshots 365] [--rows 100000] [--repeat 3]

The history is a folder of ``--snapshots`` daily Parquet snapshots of ``--rows`` rows each
(transaction ids unique per day, retry duplicates planted in every 30th snapshot and labelled in
``labels.yaml``), generated once with DuckDB and cached in ``bench/data``.

Measured in the same run, each in a fresh subprocess so its peak RSS is its own:

- ``reflex``: ``backtest(UniquenessControl(field="transaction_id"), [load_history(dir)])`` —
  schema checks of every file, one DuckDB query over all files, metrics.
- ``scan``: the same per-snapshot duplicate count written by hand as one DuckDB query over all
  files (``GROUP BY filename, transaction_id``, then per file), with DuckDB's defaults.

Targets (issue: backtester): Reflex within 1.5x of the scan; peak memory under 1 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb
from machine import machine_info

BENCH_DIR = Path(__file__).resolve().parent
FAILURE_EVERY = 30
RATIO_TARGET = 1.5
MEMORY_TARGET_MB = 1024


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


def run_reflex(folder: Path) -> dict[str, object]:
    from reflex_actions.backtest import backtest, load_history
    from reflex_actions.controls.uniqueness import UniquenessControl

    report = backtest(UniquenessControl(field="transaction_id"), [load_history(folder)])
    return {
        "flagged": report.true_positives + report.false_positives,
        "precision": report.precision,
        "recall": report.recall,
        "snapshots": report.coverage.snapshots,
    }


def run_scan(folder: Path) -> dict[str, object]:
    rows = (
        duckdb.connect()
        .execute(
            """
        WITH key_counts AS (
            SELECT filename, transaction_id, count(*) AS n
            FROM read_parquet($files, filename = true)
            GROUP BY filename, transaction_id
        )
        SELECT filename, sum(n - 1) AS duplicates FROM key_counts GROUP BY filename
        """,
            {"files": sorted(str(p) for p in folder.glob("*.parquet"))},
        )
        .fetchall()
    )
    return {"flagged": sum(1 for _, duplicates in rows if duplicates > 0), "snapshots": len(rows)}


def worker(approach: str, folder: Path) -> None:
    import reflex_actions.backtest  # noqa: F401 - imports are not what is measured

    started = time.perf_counter()
    result = run_reflex(folder) if approach == "reflex" else run_scan(folder)
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"approach": approach, "seconds": elapsed, "peak_mb": peak_mb, **result}))


def measure(approach: str, folder: Path) -> dict[str, object]:
    output = subprocess.run(
        [sys.executable, __file__, "--worker", approach, "--folder", str(folder)],
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
    parser.add_argument("--data-dir", type=Path, default=BENCH_DIR / "data")
    parser.add_argument("--worker", choices=["reflex", "scan"])
    parser.add_argument("--folder", type=Path)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.folder)
        return
    folder = history_dir(args.data_dir, args.snapshots, args.rows)
    started = time.perf_counter()
    generate(folder, args.snapshots, args.rows)
    print(f"history: {folder} ({time.perf_counter() - started:.1f} s to prepare)")
    runs: dict[str, list[dict[str, object]]] = {"reflex": [], "scan": []}
    for round_number in range(args.repeat):
        order = ["reflex", "scan"] if round_number % 2 == 0 else ["scan", "reflex"]
        for approach in order:
            runs[approach].append(measure(approach, folder))
    summary = {
        approach: {
            "median_s": round(statistics.median(float(r["seconds"]) for r in results), 3),
            "peak_mb": round(max(float(r["peak_mb"]) for r in results), 1),
            "flagged": results[0]["flagged"],
        }
        for approach, results in runs.items()
    }
    assert summary["reflex"]["flagged"] == summary["scan"]["flagged"], summary
    ratio = summary["reflex"]["median_s"] / summary["scan"]["median_s"]
    print(f"{'approach':8} {'median s':>9} {'peak MB':>8} {'flagged':>8}")
    for approach, figures in summary.items():
        median, peak, flagged = figures["median_s"], figures["peak_mb"], figures["flagged"]
        print(f"{approach:8} {median:9.2f} {peak:8.0f} {flagged:8}")
    print(
        f"reflex / scan = {ratio:.2f} (target <= {RATIO_TARGET}); reflex peak "
        f"{summary['reflex']['peak_mb']:.0f} MB (target < {MEMORY_TARGET_MB})"
    )
    print(
        json.dumps(
            {
                "snapshots": args.snapshots,
                "rows_per_snapshot": args.rows,
                "summary": summary,
                "ratio": round(ratio, 3),
                "reflex_precision": runs["reflex"][0]["precision"],
                "reflex_recall": runs["reflex"][0]["recall"],
                "machine": machine_info("duckdb"),
            }
        )
    )


if __name__ == "__main__":
    main()
