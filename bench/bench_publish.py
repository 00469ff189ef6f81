"""Benchmark an approval's publish on the embedded store: the time one decision takes to
publish a lesson on N datasets (an assertion, the coverage property and a schema read a
dataset), which is how long events wait behind it.

Usage::

    python bench/bench_publish.py [--datasets 2000]

The store is a fresh DataHub Lite file: N datasets with a ``transaction_id`` column, and a
uniqueness lesson waiting for approval; the approval of all N is decided and applied as the
action does (``decide_and_apply``), timed alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from datahub.metadata.schema_classes import StringTypeClass

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.context import decide_and_apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.lesson_store import lesson_term_mcp, load_lesson
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
        elapsed = time.perf_counter() - started
        published = load_lesson(catalog, builders.LESSON)
        assert published is not None and len(published.published_scope) == n
        print(
            json.dumps(
                {
                    "benchmark": "publish",
                    "datasets": n,
                    "seconds": round(elapsed, 2),
                    "ms_per_dataset": round(elapsed * 1000 / n, 2),
                    "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
                }
            )
        )


if __name__ == "__main__":
    main()
