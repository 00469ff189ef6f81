"""Benchmark ``datahub-reflex control run`` per control type against a hand-written DuckDB script.

Usage::

    python bench/bench_control_types.py [--rows 10000000] [--repeat 7] [--tree DIR ...]

One deterministic Parquet snapshot (generated once by DuckDB into ``--data-dir``) holds two
DOUBLE columns: ``amount`` (cents as a DOUBLE, 0 to 50,000, a negative one in every 5,003 rows
and one above 50,000 in every 20,011) and ``vat_rate`` (0, 0.05, 0.1 or 0.2, and 0.15 in every
10,007 rows), a text key ``transaction_id`` (``txn-<row>``, a retry repeating the row before it
in every 1,009) and ``customer_id`` (NULL in every 4,001 rows). The control types run on it:

- ``value_range``: ``amount`` in [0, 50000];
- ``accepted_values``: ``vat_rate`` is one of 0, 0.05, 0.1, 0.2;
- ``uniqueness``: ``transaction_id`` identifies one row (the script: one GROUP BY returning
  the duplicated keys, their total beyond the first the count);
- ``not_null``: ``customer_id`` is never NULL (the script: the NULL rows counted, then the
  first 5 by ``transaction_id``, which is how Reflex's sample names them);
- ``volume``: at least ``rows + 1000`` rows (the script: ``count(*)``, the shortfall in Python);
- ``freshness``: the newest ``booked_at`` (``2026-01-01`` plus a millisecond a row) at most a
  day old as of ``2026-01-03``: stale (the script: ``max(booked_at)``, and only when that is
  beyond the hour's tolerance the newest time kept and the times ignored);
- ``schema_contract``: the snapshot's five columns in their families and a ``refund_id`` it
  lacks (the script: a ``DESCRIBE``, the missing and retyped columns in Python);
- ``referential_integrity``: every ``order_id`` of ``bench_referential_integrity.py``'s
  10M-row ``order_lines`` is in its 1M-row Parquet ``orders`` (the script: that bench's
  fastest form, one ANTI JOIN grouped by missing id, summed in Python).

Each run is a whole process, as a scheduler starts one: Reflex's ``control run SPEC --snapshot
FILE --json`` (its SQL read from the rendered store the warm-up run filled, in the bench's own
``REFLEX_CACHE_DIR``), and a hand-written script importing DuckDB that counts the violating rows
and, the check failing, lists the 5 most frequent offending values as text (what Reflex's
sample shows). Both must give the planted count and the same sample. Runs alternate round by
round, the order reversed every other round; the median wall times and Reflex's ratio to the
script are printed, with the load average before and after. ``--tree`` (repeatable) runs the
CLI of another working tree too, e.g. a ``git archive`` of an earlier commit, in the same
rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_referential_integrity import ensure_snapshots, parent_path, planted_orphans

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CLI = "import sys; from reflex_actions.cli.main import cli; sys.argv[0] = 'datahub-reflex'; "
CLI += "sys.exit(cli())"
GENERATOR_VERSION = 4  # bump when the generated data changes, to invalidate the cache
MAX_AMOUNT = 50_000
RATES = (0, 0.05, 0.1, 0.2)
SPECS: dict[str, dict[str, Any]] = {
    "value_range": {"type": "value_range", "field": "amount", "min": 0, "max": MAX_AMOUNT},
    "accepted_values": {"type": "accepted_values", "field": "vat_rate", "values": list(RATES)},
    "uniqueness": {"type": "uniqueness", "field": "transaction_id"},
    "not_null": {"type": "not_null", "field": "customer_id"},
    "volume": {"type": "volume", "min_rows": 0},  # set to rows + SHORT_BY in main
    "freshness": {"type": "freshness", "timestamp_field": "booked_at", "max_age": "1d"},
    "schema_contract": {
        "type": "schema_contract",
        "columns": {
            "amount": "double",
            "vat_rate": "double",
            "transaction_id": "string",
            "customer_id": "string",
            "booked_at": "timestamp",
            "refund_id": "string",
        },
    },
    "referential_integrity": {
        "type": "referential_integrity",
        "field": "order_id",
        "references": {
            "dataset": "urn:li:dataset:(urn:li:dataPlatform:hive,orders,PROD)",
            "field": "order_id",
        },
    },
}
#: how many rows short of the volume control's bound the snapshot is
SHORT_BY = 1000
#: the freshness control is judged as of this time (the newest booked_at is 2026-01-01)
AS_OF = "2026-01-03T00:00:00Z"
#: the hand-written script's column and condition for each control (this script's constants)
HAND_CONDITIONS = {
    "value_range": ('"amount"', '"amount" < 0 OR "amount" > 50000'),
    "accepted_values": ('"vat_rate"', '"vat_rate" NOT IN (0, 0.05, 0.1, 0.2)'),
    "uniqueness": ('"transaction_id"', ""),
    "not_null": ('"transaction_id"', '"customer_id" IS NULL'),
}
HAND_SCRIPT = """
import json, sys
import duckdb
path, column, condition, listed = sys.argv[1:5]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # as Reflex does: a bar would print into stdout
where = f"FROM read_parquet($path) WHERE {condition}"
(count,), = con.execute(f"SELECT count(*) {where}", {"path": path}).fetchall()
if listed == "rows":  # the first rows, one each
    query = f"SELECT {column}, 1 {where} ORDER BY {column} LIMIT 5"
else:  # the values, most frequent first
    query = (f"SELECT CAST({column} AS VARCHAR) AS value, count(*) AS n {where} "
             "GROUP BY value ORDER BY n DESC, value LIMIT 5")
sample = con.execute(query, {"path": path}).fetchall() if count else []
print(json.dumps({"count": count, "sample": [[v, n] for v, n in sample]}))
"""
VOLUME_SCRIPT = """
import json, sys
import duckdb
path, minimum = sys.argv[1], int(sys.argv[2])
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
(rows,), = con.execute("SELECT count(*) FROM read_parquet($path)", {"path": path}).fetchall()
short = max(0, minimum - rows)
print(json.dumps({"count": short, "sample": [[rows, minimum]] if short else []}))
"""
FRESHNESS_SCRIPT = """
import json, sys
from datetime import datetime, timedelta, timezone
import duckdb
path, as_of = sys.argv[1], datetime.fromisoformat(sys.argv[2].replace("Z", "+00:00"))
as_of = as_of.astimezone(timezone.utc).replace(tzinfo=None)
latest = as_of + timedelta(hours=1)  # the control's default future tolerance
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
(newest,), = con.execute("SELECT max(booked_at) FROM read_parquet($p)", {"p": path}).fetchall()
ignored = 0
if newest is not None and newest > latest:  # times beyond the tolerance: not loads
    newest, ignored = con.execute(
        "SELECT max(booked_at) FILTER (WHERE booked_at <= $l), "
        "count(*) FILTER (WHERE booked_at > $l) FROM read_parquet($p)", {"p": path, "l": latest}
    ).fetchone()
age = None if newest is None else (as_of - newest).total_seconds()
stale = age is None or age > 86400
print(json.dumps({"count": int(stale), "sample": [[age, ignored]] if stale else []}))
"""
CONTRACT_SCRIPT = """
import json, sys
import duckdb
path = sys.argv[1]
expected = json.loads(sys.argv[2])  # column -> its DuckDB type
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
found = {name: kind for name, kind, *_ in con.execute(
    "DESCRIBE SELECT * FROM read_parquet($path)", {"path": path}).fetchall()}
broken = sorted([name, found.get(name)] for name, kind in expected.items()
                if found.get(name) != kind)
print(json.dumps({"count": len(broken), "sample": broken[:5]}))
"""
REFERENCE_SCRIPT = """
import json, sys
import duckdb
child, parent = sys.argv[1:3]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
missing = con.execute(
    "SELECT c.order_id AS value, count(*) AS occurrences FROM read_parquet($child) AS c "
    "ANTI JOIN read_parquet($parent) AS p ON c.order_id = p.order_id "
    "WHERE c.order_id IS NOT NULL GROUP BY value ORDER BY occurrences DESC, value",
    {"child": child, "parent": parent},
).fetchall()
sample = [[str(v), n] for v, n in missing[:5]]  # as Reflex shows a value: its text
print(json.dumps({"count": sum(n for _, n in missing), "sample": sample}))
"""
#: the types the contract's columns have in the snapshot, as DuckDB describes them
CONTRACT_TYPES = {
    "amount": "DOUBLE",
    "vat_rate": "DOUBLE",
    "transaction_id": "VARCHAR",
    "customer_id": "VARCHAR",
    "booked_at": "TIMESTAMP",
    "refund_id": "VARCHAR",
}
UNIQUE_SCRIPT = """
import json, sys
import duckdb
path, column = sys.argv[1:3]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # as Reflex does: a bar would print into stdout
duplicated = con.execute(
    f"SELECT {column}, count(*) AS n FROM read_parquet($path) GROUP BY {column} "
    "HAVING count(*) > 1 ORDER BY n DESC, 1", {"path": path}
).fetchall()
count = sum(n - 1 for _, n in duplicated)
print(json.dumps({"count": count, "sample": [[v, n] for v, n in duplicated[:5]]}))
"""


def planted(rows: int) -> dict[str, int]:
    below = len(range(0, rows, 5003))
    above = len([i for i in range(7, rows, 20011) if i % 5003])
    return {
        "value_range": below + above,
        "accepted_values": len(range(3, rows, 10007)),
        "uniqueness": len(range(1, rows, 1009)),
        "not_null": len(range(0, rows, 4001)),
        "volume": SHORT_BY,
        "freshness": 1,
        "schema_contract": 1,  # refund_id, missing
        "referential_integrity": planted_orphans(rows),
    }


def ensure_snapshot(data_dir: Path, rows: int) -> Path:
    import duckdb

    path = data_dir / f"control-types-{rows}-v{GENERATOR_VERSION}.parquet"
    if path.exists():
        return path
    data_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    duckdb.sql(
        f"""COPY (
        SELECT
            CASE WHEN i % 5003 = 0 THEN -1.0 - (hash(i) % 1000) / 100.0
                 WHEN i % 20011 = 7 THEN {MAX_AMOUNT} + 1.0 + (hash(i) % 1000) / 100.0
                 ELSE (hash(i) % {MAX_AMOUNT * 100}) / 100.0 END::DOUBLE AS amount,
            CASE WHEN i % 10007 = 3 THEN 0.15
                 ELSE [0, 0.05, 0.1, 0.2][(hash(i * 7) % 4)::BIGINT + 1] END::DOUBLE AS vat_rate,
            'txn-' || CASE WHEN i % 1009 = 1 THEN i - 1 ELSE i END AS transaction_id,
            CASE WHEN i % 4001 = 0 THEN NULL ELSE 'c' || (i % 50000) END AS customer_id,
            TIMESTAMP '2026-01-01' + to_milliseconds(i) AS booked_at
        FROM range({rows}) AS r(i)
    ) TO '{partial}' (FORMAT parquet)"""
    )
    partial.rename(path)
    return path


def _shown(row: dict[str, Any]) -> list[Any]:
    """A sample row as the scripts print it: the value (or key, or identifying column) and
    how many rows hold it (a not_null row is one row); a volume control's count and bound, a
    freshness control's age and times ignored, a contract's column and the type found."""
    if "lower_bound" in row:
        return [row["row_count"], row["lower_bound"]]
    if "age_seconds" in row:
        return [row["age_seconds"], row["future_values_ignored"]]
    if "column" in row:
        return [row["column"], row["found"]]
    if "missing_parent_value" in row:
        return [row["missing_parent_value"], row["occurrences"]]
    if "row" in row:
        return [next(iter(row["row"].values())), 1]
    value = row["value"] if "value" in row else next(iter(row["key"].values()))
    return [value, row["occurrences"]]


def reflex_answer(output: str) -> dict[str, Any]:
    result = json.loads(output)
    sample = [_shown(row) for row in result["sample"]]
    return {"count": result["violation_count"], "sample": sample}


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{command[:4]} failed: {done.stderr[-2000:]}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "reflex-bench"
    )
    parser.add_argument("--tree", type=Path, action="append", help="a working tree to run")
    parser.add_argument("--controls", help="comma-separated control types (default: all)")
    args = parser.parse_args()
    snapshot = ensure_snapshot(args.data_dir, args.rows)
    child = ensure_snapshots(args.data_dir, args.rows)  # referential_integrity's pair
    parent = parent_path(child, "parquet")
    trees = [tree.resolve() for tree in args.tree or [REPO]]
    expected = planted(args.rows)
    cache = Path(tempfile.mkdtemp(prefix="reflex-bench-cache-"))
    chosen = [name for name in SPECS if not args.controls or name in args.controls.split(",")]
    specs = {}
    for name in chosen:
        spec = SPECS[name]
        if name == "volume":
            spec = {**spec, "min_rows": args.rows + SHORT_BY}
        specs[name] = cache / f"{name}.json"  # JSON is YAML
        specs[name].write_text(json.dumps(spec))
    commands: dict[str, tuple[list[str], dict[str, str], Path]] = {}
    for name in chosen:
        target, extra = [str(snapshot)], []
        if name == "volume":
            hand = [PYTHON, "-c", VOLUME_SCRIPT, str(snapshot), str(args.rows + SHORT_BY)]
        elif name == "freshness":
            hand = [PYTHON, "-c", FRESHNESS_SCRIPT, str(snapshot), AS_OF]
            extra = ["--as-of", AS_OF]
        elif name == "schema_contract":
            hand = [PYTHON, "-c", CONTRACT_SCRIPT, str(snapshot), json.dumps(CONTRACT_TYPES)]
        elif name == "referential_integrity":
            hand = [PYTHON, "-c", REFERENCE_SCRIPT, str(child), str(parent)]
            target, extra = [str(child)], ["--reference", str(parent)]
        else:
            column, condition = HAND_CONDITIONS[name]
            script = UNIQUE_SCRIPT if name == "uniqueness" else HAND_SCRIPT
            listed = "rows" if name == "not_null" else "values"
            hand = [PYTHON, "-c", script, str(snapshot), column, condition, listed]
        commands[f"{name}: hand DuckDB"] = (hand, dict(os.environ), REPO)
        for tree in trees:
            env = {
                **os.environ,
                "PYTHONPATH": str(tree),
                "REFLEX_CACHE_DIR": str(cache / tree.name),
            }
            run = [PYTHON, "-c", CLI, "control", "run", str(specs[name]), "--snapshot"]
            commands[f"{name}: reflex ({tree.name})"] = (
                [*run, *target, *extra, "--json"],
                env,
                tree,
            )
    print(f"snapshot {snapshot} ({args.rows:,} rows); load before {os.getloadavg()}")
    answers: dict[str, dict[str, Any]] = {}
    for label, (command, env, cwd) in commands.items():  # warm-up: OS cache, Reflex's store
        _, output = timed(command, env, cwd)
        if "hand" in label:
            answers[label] = json.loads(output)
    times: dict[str, list[float]] = {label: [] for label in commands}
    for round_number in range(args.repeat):
        labels = list(commands) if round_number % 2 == 0 else list(reversed(commands))
        for label in labels:
            elapsed, output = timed(*commands[label])
            try:
                answer = json.loads(output) if "hand" in label else reflex_answer(output)
            except json.JSONDecodeError:
                raise SystemExit(f"{label} printed no JSON: {output[:200]!r}") from None
            name = label.split(":")[0]
            if answer["count"] != expected[name]:
                raise SystemExit(f"{label}: {answer['count']} violations, not {expected[name]}")
            hand = answers.setdefault(f"{name}: hand DuckDB", answer)
            if answer["sample"] != hand["sample"]:
                raise SystemExit(f"{label}: sample {answer['sample']}, not {hand['sample']}")
            times[label].append(elapsed)
    print(f"load after {os.getloadavg()}; {args.repeat} rounds, median wall time (s)")
    for label, values in times.items():
        name = label.split(":")[0]
        hand = statistics.median(times[f"{name}: hand DuckDB"])
        median = statistics.median(values)
        print(f"  {label:<48} {median:7.3f}  {median / hand:5.2f}x the script")


if __name__ == "__main__":
    main()
