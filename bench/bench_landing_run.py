"""Time one control run as a landing runs it: no engine given, on a small snapshot file.

Usage::

    python bench/bench_landing_run.py TREE [--repeat 40]

``TREE`` is the source tree imported (this repository, or a ``git archive`` of an older commit
for a before/after). The control is ``uniqueness`` on
``snapshots/finance.payments/2026-09-09.parquet`` (739 rows); one untimed run first, then the
median of ``--repeat`` runs in this process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

SNAPSHOT = "snapshots/finance.payments/2026-09-09.parquet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree")
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    sys.path.insert(0, args.tree)
    from reflex_actions.controls.uniqueness import UniquenessControl
    from reflex_actions.executor import run_control

    control = UniquenessControl(field="transaction_id")
    run_control(control, SNAPSHOT)
    walls = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        run_control(control, SNAPSHOT)
        walls.append(time.perf_counter() - started)
    print(f"{args.tree}: median {1000 * statistics.median(walls):.1f} ms over {args.repeat} runs")


if __name__ == "__main__":
    main()
