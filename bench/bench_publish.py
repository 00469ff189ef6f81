"""Benchmark an approval's publish on the embedded store: how long the approval's decision
takes (it publishes the first ``IN_DECISION`` datasets: an assertion, the coverage property and
a schema read a dataset), how long each later slice of the rollout takes (how long an event
waits behind one at most), and the whole rollout's cost a dataset.

Usage::

    python bench/bench_publish.py [--datasets 2000]

The store is a fresh DataHub Lite file: N datasets with a ``transaction_id`` column, and a
uniqueness lesson waiting for approval; the approval of all N is decided and applied as the
action does (``decide_and_apply``), then the rollout carried to its end as the action's worker
does (``continue_rollouts``, each slice timed within its turn).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datahub.metadata.schema_classes import StringTypeClass

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.context import decide_and_apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.lesson_store import lesson_term_mcp, load_lesson
from reflex_actions.handlers.rollout import continue_rollouts
from tests.catalog.builders import field, schema
from tests.handlers import builders

BATCH = 2000  # aspects per emit() while building


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=2000)
    n = parser.parse_args().datasets
    with tempfile.TemporaryDirectory() as folder:
        catalog = LiteCatalog(Path(folder) / "publish.db")
        scope = tuple(f"{builders.PAYMENTS[:-6]}_{i:06d},PROD)" for i in range(n))
        column = field("transaction_id", "VARCHAR", StringTypeClass())
        mcps = [acting_as(builders.STEWARD, urn, schema(column)) for urn in scope]
        for first in range(0, n, BATCH):
            catalog.emit(mcps[first : first + BATCH])
        pending = builders.lesson(
            state=builders.LessonState.PENDING_APPROVAL,
            gate_values={builders.ROOT_CAUSE_STATUS: "CONFIRMED", builders.APPROVAL: "PENDING"},
            approval_open=True,
        )
        catalog.emit([lesson_term_mcp(pending, "t", builders.REFLEX)])
        ctx = builders.context(catalog)
        load = os.getloadavg()[0]
        started = time.perf_counter()
        approval = builders.approval(builders.STEWARD, scope=scope)
        decide_and_apply(on_lesson_properties, approval, ctx)
        decision = time.perf_counter() - started
        slices: list[float] = []

        @contextmanager
        def timed_turn() -> Iterator[None]:
            began = time.perf_counter()
            yield
            slices.append(time.perf_counter() - began)

        continue_rollouts(ctx, timed_turn)
        elapsed = time.perf_counter() - started
        published = load_lesson(catalog, builders.LESSON)
        assert published is not None and published.rollout is None
        assert len(published.published_scope) == n
        print(
            json.dumps(
                {
                    "benchmark": "publish",
                    "datasets": n,
                    "decision_s": round(decision, 2),
                    "slices": len(slices) - 1,  # the first turn lists the lessons
                    "slowest_slice_s": round(max(slices[1:], default=0), 3),
                    "seconds": round(elapsed, 2),
                    "ms_per_dataset": round(elapsed * 1000 / n, 2),
                    "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
                }
            )
        )


if __name__ == "__main__":
    main()
