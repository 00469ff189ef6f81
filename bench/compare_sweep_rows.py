"""Check that two trees' schedule sweeps leave the same store: every row they write, the same.

Usage::

    python bench/compare_sweep_rows.py --before /tmp/base [--after .] [--datasets 1000]
        [--data-dir bench/data]

Each tree (``--before``: another checkout, e.g. ``git archive 810c48a | tar -x -C /tmp/base``)
runs in a fresh process of its own (its package and bench modules first on the path), on its
own copy of ``bench_schedule_sweep.py``'s cached store: the cold sweep at T1, then the second
sweep of the slot. Then the store is listed: every row of ``metadata_aspect_v2`` in the order
written (rowid, urn, aspect, version, metadata, system metadata: all but ``createdon``, which
Lite stamps with the wall clock), of ``metadata_edge_v2`` and of Reflex's index, and the two
sweeps' counts. The two lists must be equal, line for line; the first difference is printed
otherwise (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_catalog import BENCH_DIR

ROWS = (
    "SELECT rowid, urn, aspect_name, version, metadata, system_metadata"
    " FROM metadata_aspect_v2 ORDER BY rowid"
)
OTHER_TABLES = (
    "SELECT * FROM metadata_edge_v2 ORDER BY 1, 2, 3",
    "SELECT * FROM reflex_index ORDER BY 1, 2, 3",
    "SELECT * FROM reflex_index_state",
)


def dump(store: Path, out: Path) -> None:
    """In this process (the tree on ``sys.path``): both sweeps on ``store``, then its rows."""
    import bench_schedule_sweep as bench

    from reflex_actions.handlers.scheduled import on_schedule

    ctx = bench.sweep_context(store)
    cold = on_schedule(ctx, bench.T1, bench.INTERVAL_S)
    again = on_schedule(ctx, bench.T1 + 60_000, bench.INTERVAL_S)
    ctx.catalog.close()
    with sqlite3.connect(store) as db, out.open("w") as lines:
        lines.write(json.dumps([repr(cold), repr(again)]) + "\n")
        for query in (ROWS, *OTHER_TABLES):
            for row in db.execute(query):
                lines.write(json.dumps([query.split(" FROM ")[1].split()[0], *row]) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other tree")
    parser.add_argument("--after", type=Path, default=Path(__file__).parent.parent)
    parser.add_argument("--datasets", type=int, default=1000)
    parser.add_argument("--data-dir", type=Path, default=BENCH_DIR / "data")
    parser.add_argument("--dump", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        dump(*args.dump)
        return
    from bench_schedule_sweep import store_path

    cached = store_path(args.data_dir, args.datasets)
    if not cached.exists():
        sys.exit(f"no cached store {cached}: run bench_schedule_sweep.py first")
    listed: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="reflex-rows-") as folder:
        for name, tree in (("before", args.before), ("after", args.after)):
            store, out = Path(folder) / f"{name}.db", Path(folder) / f"{name}.jsonl"
            shutil.copyfile(cached, store)
            paths = [str(tree.resolve() / "bench"), str(tree.resolve())]
            run = (
                f"import runpy, sys; sys.path[:0] = {paths!r}; "
                f"sys.argv = ['compare', '--before', '.', '--dump', {str(store)!r}, {str(out)!r}]; "
                f"runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
            )  # this script, the tree's package and bench modules (an older tree has no copy)
            environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            subprocess.run([sys.executable, "-c", run], check=True, cwd=tree, env=environment)
            listed[name] = out.read_text().splitlines()
    before, after = listed["before"], listed["after"]
    print(f"before: {len(before):,} lines ({before[0]}); after: {len(after):,} lines")
    for number, (old, new) in enumerate(zip(before, after, strict=False)):
        if old != new:
            print(
                f"first difference, line {number + 1}:\n  before {old[:300]}\n  after  {new[:300]}"
            )
            sys.exit(1)
    if len(before) != len(after):
        sys.exit("the lists differ in length")
    print("the same rows, JSON and order (createdon aside)")


if __name__ == "__main__":
    main()
