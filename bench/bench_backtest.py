"""Benchmark the backtester against a hand-written per-file DuckDB loop and the old single query.

Usage::

    python bench/bench_backtest.py [--snapshots 365] [--rows 100000] [--repeat 3]
        [--control uniqueness] [--approaches reflex,loop,single] [--max-wait 300]
        [--with-imports] [--data-dir bench/data]

The history is a folder of ``--snapshots`` daily Parquet snapshots (named by their date) of
``--rows`` rows each, generated once with DuckDB and cached in ``--data-dir``. Every 30th
snapshot is a failure of every kind at once, labelled in ``labels.yaml``: 10 % fewer rows
(``volume``), retry duplicates of 0.1 % of its rows (``uniqueness``), and in 0.1 % of them each a
NULL ``account_id`` (``not_null``), a negative ``amount`` (``value_range``), an unlisted
``currency`` (``accepted_values``); its ``booked_at`` times are 5 days old (``freshness``).
``--control`` picks the control backtested, and the loop written by hand for it.

Measured in the same run, each in a fresh subprocess so its peak RSS is its own, interleaved
with the order rotating every round:

- ``reflex``: ``backtest(control, [load_history(dir)])`` — one query per snapshot (several at
  once; a volume control's one after another), metrics.
- ``loop``: the control's per-snapshot counts written by hand, one DuckDB query per file in a
  plain loop on one connection with DuckDB's defaults. Its counts (rows and violations of every
  snapshot) are asserted equal to Reflex's.
- ``single`` (uniqueness only): the query the backtester ran before (issue 15): the control
  compiled on every file as one relation partitioned by file, one ``GROUP BY`` with a 768 MB
  memory limit and a spill folder.

The machine is shared: the run holds ``/tmp/reflex-bench.lock`` (as
``bench_referential_integrity.py`` does) and waits for a quiet load average before it starts
and before every round; the loads are recorded. Targets: Reflex <= 1.0x the loop, peak RSS
<= 250 MB (issue 15) and <= 1.5x the loop's (issue 27), time linear in the number of snapshots.
Module imports are off the clock for every approach (the loop's duckdb, Reflex's backtester,
the control's kind and sqlglot's DuckDB dialect), as an action has them loaded;
``--with-imports`` times a fresh process's first backtest, imports included.
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
from datetime import date, datetime, timedelta
from datetime import time as time_of_day
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from bench_referential_integrity import bench_lock, wait_for_quiet
from bench_uniqueness import load_average
from machine import machine_info

if TYPE_CHECKING:
    from reflex_actions.controls import Control

#: what a worker reports: flagged snapshots, each snapshot's [rows, violations], ...
Run = dict[str, Any]

BENCH_DIR = Path(__file__).resolve().parent
FAILURE_EVERY = 30
RATIO_TARGET = 1.0
MEMORY_TARGET_MB = 250
MEMORY_RATIO_TARGET = 1.5
FIRST_DAY = date(2025, 1, 1)
#: how old a failing snapshot's ``booked_at`` times are, and the freshness control's bound
STALE_DAYS = 5
MAX_AGE_DAYS = 2
CURRENCIES = ("EUR", "USD")


def history_dir(data_dir: Path, snapshots: int, rows: int) -> Path:
    return data_dir / f"history_v2_{snapshots}x{rows}"


def snapshot_ids(snapshots: int) -> list[str]:
    return [(FIRST_DAY + timedelta(days=day)).isoformat() for day in range(snapshots)]


def generate(folder: Path, snapshots: int, rows: int) -> None:
    """One Parquet file per day; every FAILURE_EVERY-th day fails every control (see above)."""
    if (folder / "labels.yaml").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    failures = []
    for day, snapshot_id in enumerate(snapshot_ids(snapshots)):
        failing = day % FAILURE_EVERY == FAILURE_EVERY - 1
        if failing:
            failures.append(snapshot_id)
        kept, duplicates = (rows - rows // 10, rows // 1000) if failing else (rows, 0)
        bad = "i % 1000" if failing else "-1"  # 0, 1, 2: a NULL, a negative, an unlisted value
        age = STALE_DAYS if failing else 0
        # every literal below is a number or a date this script made, never outside text
        con.execute(
            f"""COPY (
                WITH base AS (
                    SELECT i, 'txn-' || lpad(CAST((i * 7919 + {day}) % {rows * 10} AS VARCHAR),
                               9, '0') || '-' || {day} AS transaction_id
                    FROM range({kept}) t(i)
                    UNION ALL
                    SELECT i, 'txn-' || lpad(CAST((i * 7919 + {day}) % {rows * 10} AS VARCHAR),
                               9, '0') || '-' || {day}
                    FROM range({duplicates}) t(i)
                )
                SELECT transaction_id,
                       CASE WHEN {bad} = 0 THEN NULL ELSE i % 5000 END AS account_id,
                       CASE WHEN {bad} = 1 THEN -5.0 ELSE round(random() * 1000, 2) END
                           AS amount,
                       CASE WHEN {bad} = 2 THEN 'XXX' WHEN i % 2 = 0 THEN 'EUR' ELSE 'USD' END
                           AS currency,
                       TIMESTAMP '{snapshot_id}' - INTERVAL {age} DAY
                           + to_seconds(i % 86400) AS booked_at
                FROM base
            ) TO '{folder / (snapshot_id + ".parquet")}' (FORMAT parquet)"""
        )
    (folder / "labels.yaml").write_text(
        "failures:\n" + "".join(f"  - '{sid}'\n" for sid in failures)
    )


def make_control(name: str, rows: int) -> Control:
    """The control ``--control`` names, set to flag exactly the failing snapshots."""
    from reflex_actions.controls.freshness import FreshnessControl
    from reflex_actions.controls.not_null import NotNullControl
    from reflex_actions.controls.uniqueness import UniquenessControl
    from reflex_actions.controls.values import AcceptedValuesControl, ValueRangeControl
    from reflex_actions.controls.volume import VolumeControl

    return {
        "uniqueness": lambda: UniquenessControl(field="transaction_id"),
        "not_null": lambda: NotNullControl(field="account_id"),
        "value_range": lambda: ValueRangeControl(field="amount", min=0, max=1000),
        "accepted_values": lambda: AcceptedValuesControl(field="currency", values=CURRENCIES),
        "volume": lambda: VolumeControl(min_rows=rows - rows // 20),
        "freshness": lambda: FreshnessControl(
            timestamp_field="booked_at", max_age=f"{MAX_AGE_DAYS}d"
        ),
    }[name]()


def run_reflex(folder: Path, control_name: str, rows: int, workers: int | None) -> Run:
    from reflex_actions.backtest import backtest, load_history
    from reflex_actions.backtest.engine import DEFAULT_WORKERS

    report = backtest(
        make_control(control_name, rows),
        [load_history(folder)],
        workers=workers or DEFAULT_WORKERS,
    )
    return {
        "flagged": sum(1 for outcome in report.per_snapshot if outcome.flagged),
        "counts": [[o.rows_scanned, o.violation_count] for o in report.per_snapshot],
        "precision": report.precision,
        "recall": report.recall,
        "snapshots": report.coverage.snapshots,
    }


def snapshot_files(folder: Path) -> list[str]:
    return sorted(str(path) for path in folder.glob("*.parquet"))


#: control -> the hand-written query of a file's row count and violation count
LOOP_QUERIES = {
    "uniqueness": """SELECT coalesce(sum(n), 0), coalesce(sum(n - 1), 0) FROM (
                         SELECT count(*) AS n FROM read_parquet($file) GROUP BY transaction_id
                     )""",
    "not_null": """SELECT count(*), count(*) FILTER (WHERE account_id IS NULL)
                   FROM read_parquet($file)""",
    "value_range": """SELECT count(*), count(*) FILTER (WHERE amount < 0 OR amount > 1000)
                      FROM read_parquet($file)""",
    "accepted_values": """SELECT count(*), count(*) FILTER (WHERE currency NOT IN ('EUR', 'USD'))
                          FROM read_parquet($file)""",
    "volume": "SELECT count(*), 0 FROM read_parquet($file)",
    "freshness": "SELECT count(*), max(booked_at) FROM read_parquet($file)",
}


#: the freshness loop's second query, run only when a file's newest time is beyond the tolerance
FRESH_KEPT = "SELECT max(booked_at) FILTER (WHERE booked_at <= $latest) FROM read_parquet($file)"


def run_loop(folder: Path, control_name: str, rows: int, workers: int | None) -> Run:
    """The plain loop: one query per file, one after the other; a volume or freshness
    control's judgement of the count or the newest time made in Python (a freshness file
    whose newest time is beyond the control's tolerance queried again for the newest time
    kept, as the control ignores the times beyond it)."""
    con = duckdb.connect()
    counts = []
    for file in snapshot_files(folder):
        scanned, measured = con.execute(LOOP_QUERIES[control_name], {"file": file}).fetchone()
        if control_name == "volume":
            measured = max(0, rows - rows // 20 - scanned)
        elif control_name == "freshness":
            # a day's snapshot is judged as of the day's end: the next midnight, as Reflex does
            day = date.fromisoformat(Path(file).stem)
            as_of = datetime.combine(day + timedelta(days=1), time_of_day())
            latest = as_of + timedelta(hours=1)  # the control's default future tolerance
            if measured is not None and measured > latest:  # beyond it: ignored, not a load
                (measured,) = con.execute(FRESH_KEPT, {"file": file, "latest": latest}).fetchone()
            measured = int(measured is None or as_of - measured > timedelta(days=MAX_AGE_DAYS))
        counts.append([scanned, measured])
    return {
        "flagged": sum(1 for _, violations in counts if violations > 0),
        "counts": counts,
        "snapshots": len(counts),
    }


def run_single(folder: Path, control_name: str, rows: int, workers: int | None) -> Run:
    """The backtester's uniqueness query before issue 15: every file as one partitioned
    relation."""
    from dataclasses import replace

    from reflex_actions.snapshots import SnapshotFile, files_relation

    if control_name != "uniqueness":
        raise SystemExit("the single query is the uniqueness control's only")
    control = make_control(control_name, rows)
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
        rows_by_file = con.execute(query.sql, query.params).fetchall()
    flagged = sum(
        1
        for _, scanned, violations, *_ in rows_by_file
        if violations > control.allowed_violations(scanned)
    )
    return {"flagged": flagged, "snapshots": len(rows_by_file)}


#: approach -> run(history folder, control, rows a snapshot, Reflex's workers or None)
APPROACHES: dict[str, Callable[[Path, str, int, int | None], Run]] = {
    "reflex": run_reflex,
    "loop": run_loop,
    "single": run_single,
}


def worker(
    approach: str, folder: Path, control: str, rows: int, workers: int | None, with_imports: bool
) -> None:
    # Imports are not what is measured (the loop imports duckdb at the top of this file): the
    # backtester and sqlglot's DuckDB dialect, which Reflex imports where first used, load
    # off the clock; ``with_imports`` measures a fresh process's first backtest instead.
    if not with_imports:
        from sqlglot.dialects.duckdb import DuckDB  # noqa: F401

        import reflex_actions.backtest.engine  # noqa: F401

        make_control(control, rows)  # its kind's module loaded, as an action has it

    started = time.perf_counter()
    result = APPROACHES[approach](folder, control, rows, workers)
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"approach": approach, "seconds": elapsed, "peak_mb": peak_mb, **result}))


def measure(
    approach: str, folder: Path, control: str, rows: int, workers: int | None, with_imports: bool
) -> Run:
    command = [sys.executable, __file__, "--worker", approach, "--folder", str(folder)]
    command += ["--control", control, "--rows", str(rows)]
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
    parser.add_argument("--approaches", default="reflex,loop")
    parser.add_argument("--control", choices=list(LOOP_QUERIES), default="uniqueness")
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
        worker(args.worker, args.folder, args.control, args.rows, args.workers, args.with_imports)
        return
    approaches = args.approaches.split(",")
    unknown = sorted(set(approaches) - set(APPROACHES))
    if unknown:
        parser.error(f"unknown approach(es) {unknown}; expected some of {list(APPROACHES)}")
    folder = history_dir(args.data_dir, args.snapshots, args.rows)
    started = time.perf_counter()
    generate(folder, args.snapshots, args.rows)
    print(f"history: {folder} ({time.perf_counter() - started:.1f} s to prepare)")
    runs: dict[str, list[Run]] = {approach: [] for approach in approaches}
    with bench_lock():
        start = wait_for_quiet(args.max_wait)
        rounds = []
        for round_number in range(args.repeat):
            rounds.append(start if round_number == 0 else wait_for_quiet(args.max_wait / 5))
            shift = round_number % len(approaches)
            for approach in approaches[shift:] + approaches[:shift]:
                runs[approach].append(
                    measure(
                        approach, folder, args.control, args.rows, args.workers, args.with_imports
                    )
                )
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
    counted = {
        json.dumps(r["counts"]) for results in runs.values() for r in results if "counts" in r
    }
    assert len(counted) == 1, "Reflex's per-snapshot counts differ from the loop's"
    print(f"{'approach':8} {'median s':>9} {'peak MB':>8} {'flagged':>8}")
    for approach, figures in summary.items():
        median, peak, flagged = figures["median_s"], figures["peak_mb"], figures["flagged"]
        print(f"{approach:8} {median:9.2f} {peak:8.0f} {flagged:8}")
    ratios = {
        f"reflex_vs_{other}": round(summary["reflex"]["median_s"] / summary[other]["median_s"], 3)
        for other in summary
        if other != "reflex" and "reflex" in summary
    }
    if "reflex" in summary and "loop" in summary:
        ratios["reflex_vs_loop_peak_mb"] = round(
            summary["reflex"]["peak_mb"] / summary["loop"]["peak_mb"], 3
        )
        print(
            f"{args.control}: {ratios} (targets reflex_vs_loop <= {RATIO_TARGET}, peak <= "
            f"{MEMORY_RATIO_TARGET}x the loop's and <= {MEMORY_TARGET_MB} MB)"
        )
    print(
        json.dumps(
            {
                "control": args.control,
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
