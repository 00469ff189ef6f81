"""Benchmark Reflex's controls on the postgres engine against hand-written PostgreSQL queries.

Usage::

    flock /tmp/reflex-bench.lock .venv/bin/python bench/bench_postgres.py [--rows 1000000]
        [--repeat 5] [--passing] [--url postgresql://...] [--explain]

The server is the one ``--url`` (else ``REFLEX_POSTGRES_URL``) names, else a fresh cluster on
loopback started for the run (the engine tests' ``running_server``). The table is generated in
the server with ``generate_series`` (deterministic, bench_uniqueness's scheme): card
transactions in which one row in a thousand is a retry duplicate, ``account_id`` is NULL in one
original in a thousand and ``currency`` an unknown code in one in 20,011; with ``--passing``
none of these. It is kept (named by its rows, a comment naming the generator's version) on a
server given by URL, then vacuumed and analysed, so every approach reads the same all-visible
pages.

Three controls, each against its hand-written queries, every approach on a connection of its
own with the engine's settings (read-only, statement timeout, UTC), opened before the clock:

- uniqueness of ``transaction_id``: ``count(key) - count(DISTINCT key)`` and GROUP BY/HAVING;
- not_null of ``account_id``: ``count(*) FILTER``, ``count(CASE ...)`` and ``WHERE ... IS NULL``;
- accepted_values of ``currency``: the same three forms with ``NOT IN (...)``.

Those forms return the violations alone; Reflex's counts also return the rows scanned, which a
server table holds nowhere for free (``count(*)`` alone is a full scan). The queries returning
both, as Reflex does (``count(*), count(*) FILTER (...)``, ``count(*), count(*) - count(col)``,
``count(*), count(key) - count(DISTINCT key)``), are timed too and reported as a second
reference beside the first.

Reflex is ``run_control(control, TableTarget(...), engine=PostgresEngine(url))``: the catalog
read for the column types, the counts, and on a failing table the five worst offenders' sample
(the hand-written queries only count: the best of them is the bar, issue 15: Reflex <= 1.2x;
on a failing table a count followed by a hand-written sample query is timed too, like for like).
After a warm-up round (the table into the buffers), the approaches run in interleaved rounds,
the order rotating every round; medians and bests are reported, with the load average, the
connection set-up and catalog read measured apart, and the server's settings that shape plans.
This script takes no lock: wrap it in ``flock /tmp/reflex-bench.lock``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_uniqueness import DUPLICATE_EVERY, expected_duplicates, load_average
from machine import machine_info

if TYPE_CHECKING:
    from reflex_actions.controls.base import Control
    from reflex_actions.engines.postgres import PostgresEngine

BENCH_DIR = Path(__file__).resolve().parent
GENERATOR_VERSION = 1  # bump when the generated data changes, to regenerate a kept table
SCHEMA = "reflex_bench"
REFLEX_TARGET = 1.2  # Reflex at most this many times the best hand-written query
NULL_EVERY = 1000  # account_id is NULL where an original's i % 1000 = 7
NULL_AT = 7
UNKNOWN_CURRENCY_EVERY = 20011  # an unknown currency where an original's i % 20011 = 0
KNOWN_CURRENCIES = ("EUR", "USD", "GBP", "CHF", "JPY")
UNKNOWN_CURRENCIES = ("XXX", "EURO", "usd")
RETRY_STRIDE = 1000003  # retry k copies original (k * stride) % originals (a prime: distinct)
#: the server settings recorded with the figures: they decide the plans both sides get
SERVER_SETTINGS = (
    "server_version",
    "shared_buffers",
    "work_mem",
    "max_parallel_workers_per_gather",
    "jit",
)

# --- data ---------------------------------------------------------------------------------------

GENERATE_SQL = """
CREATE TABLE {table} AS
WITH originals AS (
    SELECT
        i,
        'txn-' || lpad(((i * 7368787) % 1000000000)::text, 9, '0') AS transaction_id,
        CASE WHEN {passing} OR i % {null_every} <> {null_at}
            THEN 'acc-' || lpad(((i * 2654435761) % 250000)::text, 6, '0') END AS account_id,
        (((i * 40503) % 5000000) / 100.0 + 0.01)::numeric(18, 2) AS amount,
        CASE WHEN NOT {passing} AND i % {unknown_every} = 0
            THEN (ARRAY[{unknown}])[1 + (i / {unknown_every}) % {unknown_count}]
            ELSE (ARRAY[{known}])[1 + (i * 7919) % {known_count}] END AS currency,
        TIMESTAMP '2025-01-01' + (i * 3 + (i * 48271) % 3) * INTERVAL '1 millisecond'
            AS created_at
    FROM generate_series(0::bigint, {originals} - 1) AS g(i)
),
retries AS (
    SELECT o.i, o.transaction_id, o.account_id, o.amount, o.currency,
           o.created_at + (1500 + k % 1000) * INTERVAL '1 millisecond' AS created_at
    FROM generate_series(0::bigint, {duplicates} - 1) AS r(k)
    JOIN originals AS o ON o.i = (k * {stride}) % {originals}
)
SELECT transaction_id, account_id, amount, currency, created_at
FROM (SELECT * FROM originals UNION ALL SELECT * FROM retries) AS every_row
ORDER BY created_at, transaction_id
"""


def table_name(rows: int, passing: bool) -> str:
    return f"{SCHEMA}.transactions_{rows}{'_passing' if passing else ''}"


def planted(rows: int, passing: bool) -> dict[str, int]:
    """The violations the generator plants per control (a retry copies its original's row)."""
    if passing:
        return {"uniqueness": 0, "not_null": 0, "accepted_values": 0}
    duplicates = expected_duplicates(rows)
    originals = rows - duplicates
    copied = [(k * RETRY_STRIDE) % originals for k in range(duplicates)]
    nulls = len(range(NULL_AT, originals, NULL_EVERY))
    nulls += sum(i % NULL_EVERY == NULL_AT for i in copied)
    unknown = len(range(0, originals, UNKNOWN_CURRENCY_EVERY))
    unknown += sum(i % UNKNOWN_CURRENCY_EVERY == 0 for i in copied)
    return {"uniqueness": duplicates, "not_null": nulls, "accepted_values": unknown}


def ensure_table(url: str, rows: int, passing: bool) -> str:
    """The bench table for ``rows``, generated in the server (then vacuumed and analysed)
    unless a table of this generator's version is there already."""
    import psycopg

    name = table_name(rows, passing)
    version = f"reflex bench generator v{GENERATOR_VERSION}"
    with psycopg.connect(url, autocommit=True) as connection:
        kept = connection.execute(
            "SELECT obj_description(to_regclass(%s), 'pg_class')", [name]
        ).fetchone()
        if kept is not None and kept[0] == version:
            return name
        print(f"generating {name} ({rows:,} rows) ...", flush=True)
        started = time.perf_counter()
        duplicates = expected_duplicates(rows, passing)
        connection.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        connection.execute(f"DROP TABLE IF EXISTS {name}")
        connection.execute(
            GENERATE_SQL.format(
                table=name,
                passing="true" if passing else "false",
                null_every=NULL_EVERY,
                null_at=NULL_AT,
                unknown_every=UNKNOWN_CURRENCY_EVERY,
                unknown=", ".join(f"'{code}'" for code in UNKNOWN_CURRENCIES),
                unknown_count=len(UNKNOWN_CURRENCIES),
                known=", ".join(f"'{code}'" for code in KNOWN_CURRENCIES),
                known_count=len(KNOWN_CURRENCIES),
                originals=rows - duplicates,
                duplicates=duplicates,
                stride=RETRY_STRIDE,
            )
        )
        connection.execute(f"VACUUM (FREEZE, ANALYZE) {name}")
        connection.execute(f"COMMENT ON TABLE {name} IS '{version}'")
        print(f"generated in {time.perf_counter() - started:.1f} s", flush=True)
    return name


@contextmanager
def server_url(url: str | None) -> Iterator[str]:
    """``url`` when given, else a fresh loopback cluster's for the run (stopped after)."""
    if url:
        yield url
        return
    sys.path.insert(0, str(BENCH_DIR.parent))  # tests/ is importable from a checkout
    from tests.engines.postgres_server import running_server

    with running_server() as server:
        print(f"started a server on {server.host}:{server.port} in {server.started_in_s:.1f} s")
        yield server.url()


# --- approaches ---------------------------------------------------------------------------------

KNOWN_LIST = ", ".join(f"'{code}'" for code in KNOWN_CURRENCIES)
HAND_SQL = {
    "uniqueness": {
        "count_distinct": "SELECT count(transaction_id) - count(DISTINCT transaction_id) FROM {t}",
        "group_by": (
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM {t} "
            "WHERE transaction_id IS NOT NULL GROUP BY transaction_id HAVING count(*) > 1) AS d"
        ),
    },
    "not_null": {
        "count_filter": "SELECT count(*) FILTER (WHERE account_id IS NULL) FROM {t}",
        "count_case": "SELECT count(CASE WHEN account_id IS NULL THEN 1 END) FROM {t}",
        "where": "SELECT count(*) FROM {t} WHERE account_id IS NULL",
    },
    "accepted_values": {
        "count_filter": f"SELECT count(*) FILTER (WHERE currency NOT IN ({KNOWN_LIST})) FROM {{t}}",
        "count_case": (
            f"SELECT count(CASE WHEN currency NOT IN ({KNOWN_LIST}) THEN 1 END) FROM {{t}}"
        ),
        "where": f"SELECT count(*) FROM {{t}} WHERE currency NOT IN ({KNOWN_LIST})",
    },
}
#: The same answer as Reflex's counts: the rows scanned *and* the violations (a server table
#: has no free row count, so the violations-only forms above do less work than Reflex must).
#: The violation count is each query's second column.
SAME_ANSWER_SQL = {
    "uniqueness": {
        "rows_and_count_distinct": (
            "SELECT count(*), count(transaction_id) - count(DISTINCT transaction_id) FROM {t}"
        ),
    },
    "not_null": {
        "rows_and_filter": "SELECT count(*), count(*) FILTER (WHERE account_id IS NULL) FROM {t}",
        "rows_minus_count": "SELECT count(*), count(*) - count(account_id) FROM {t}",
    },
    "accepted_values": {
        "rows_and_filter": (
            f"SELECT count(*), count(*) FILTER (WHERE currency NOT IN ({KNOWN_LIST})) FROM {{t}}"
        ),
    },
}
#: on a failing table Reflex also fetches the five worst offenders: the like-for-like hand
#: approach is a count (the form named) followed by the sample query a team would write
HAND_SAMPLE_SQL = {
    "uniqueness": (
        "count_distinct",
        "SELECT transaction_id, count(*) AS n FROM {t} WHERE transaction_id IS NOT NULL "
        "GROUP BY transaction_id HAVING count(*) > 1 ORDER BY n DESC, transaction_id LIMIT 5",
    ),
    "not_null": ("where", "SELECT account_id FROM {t} WHERE account_id IS NULL LIMIT 5"),
    "accepted_values": (
        "where",
        f"SELECT currency, count(*) AS n FROM {{t}} WHERE currency NOT IN ({KNOWN_LIST}) "
        "GROUP BY currency ORDER BY n DESC, currency LIMIT 5",
    ),
}
WITH_SAMPLE = "then_sample"


def controls() -> dict[str, Control]:
    from reflex_actions.controls.not_null import NotNullControl
    from reflex_actions.controls.uniqueness import UniquenessControl
    from reflex_actions.controls.values import AcceptedValuesControl

    return {
        "uniqueness": UniquenessControl(field="transaction_id"),
        "not_null": NotNullControl(field="account_id"),
        "accepted_values": AcceptedValuesControl(field="currency", values=list(KNOWN_CURRENCIES)),
    }


@dataclass(frozen=True)
class Approach:
    control: str
    name: str  # "reflex" or the hand-written form
    run: Callable[[], int]  # the violations found

    @property
    def label(self) -> str:
        return f"{self.control}/{self.name}"


def approaches(url: str, table: str, passing: bool) -> tuple[list[Approach], list[PostgresEngine]]:
    """Every approach's run, each on its own engine connection (opened here, before timing),
    and those engines (to close); on a failing table, each count-then-sample hand approach."""
    from reflex_actions.engines.base import TableTarget
    from reflex_actions.engines.postgres import PostgresEngine
    from reflex_actions.executor import run_control

    engines: list[PostgresEngine] = []

    def connected() -> PostgresEngine:
        engines.append(PostgresEngine(url))
        return engines[-1]

    def reflex(control: Control) -> Callable[[], int]:
        engine, target = connected(), TableTarget(table)
        return lambda: run_control(control, target, engine=engine).violation_count

    def hand(sql: str, sample_sql: str | None = None, column: int = 0) -> Callable[[], int]:
        connection = connected().connection  # the engine's settings, a plain query
        count, sample = sql.format(t=table), (sample_sql or "").format(t=table)

        def run() -> int:
            found = int(connection.execute(count).fetchone()[column])  # type: ignore[index]
            if sample and found:
                connection.execute(sample).fetchall()
            return found

        return run

    runs = []
    for kind, control in controls().items():
        runs.append(Approach(kind, "reflex", reflex(control)))
        runs += [Approach(kind, form, hand(sql)) for form, sql in HAND_SQL[kind].items()]
        runs += [
            Approach(kind, form, hand(sql, column=1)) for form, sql in SAME_ANSWER_SQL[kind].items()
        ]
        if not passing:
            form, sample_sql = HAND_SAMPLE_SQL[kind]
            then_sample = hand(HAND_SQL[kind][form], sample_sql)
            runs.append(Approach(kind, f"{form}_{WITH_SAMPLE}", then_sample))
    return runs, engines


# --- measuring ----------------------------------------------------------------------------------


def timed(run: Callable[[], Any], times: int) -> list[float]:
    walls = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        walls.append(time.perf_counter() - started)
    return walls


def set_up_costs(url: str, table: str, repeat: int) -> dict[str, float]:
    """Median seconds of what a Reflex run pays besides its queries: a plain psycopg connect,
    the engine's (connect, settings, current_database), and its catalog read of the columns."""
    import psycopg

    from reflex_actions.engines.base import TableTarget
    from reflex_actions.engines.postgres import PostgresEngine

    engine = PostgresEngine(url)
    try:
        catalog = timed(lambda: engine.relation(TableTarget(table), ["transaction_id"]), repeat)
    finally:
        engine.close()
    return {
        "psycopg_connect": statistics.median(timed(lambda: psycopg.connect(url).close(), repeat)),
        "engine_connect": statistics.median(timed(lambda: PostgresEngine(url).close(), repeat)),
        "catalog_read": statistics.median(catalog),
    }


def server_settings(url: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url) as connection:
        return {name: connection.execute(f"SHOW {name}").fetchone()[0] for name in SERVER_SETTINGS}  # type: ignore[index]


def explain(url: str, table: str, best_hand: dict[str, str]) -> dict[str, dict[str, str]]:
    """EXPLAIN (ANALYZE, BUFFERS) of Reflex's counts (and sample) queries as the engine sends
    them, and of the best hand-written query, per control."""
    import psycopg

    from reflex_actions.engines.base import TableTarget
    from reflex_actions.engines.postgres import PostgresEngine, positional

    engine = PostgresEngine(url)
    plans: dict[str, dict[str, str]] = {}
    try:
        for kind, control in controls().items():
            relation = engine.relation(TableTarget(table), control.required_columns())
            query = control.compile(relation)
            queries = {"reflex_counts": query.counts, "reflex_sample": query.sample}
            plans[kind] = {}
            for label, tree in queries.items():
                if tree is None:
                    continue
                text, values = positional(*query.render(tree, relation, engine.dialect))
                with psycopg.RawCursor(engine.connection) as cursor:
                    rows = cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + text, values).fetchall()
                plans[kind][label] = "\n".join(row[0] for row in rows)
            hand_sql = HAND_SQL[kind][best_hand[kind]].format(t=table)
            rows = engine.connection.execute("EXPLAIN (ANALYZE, BUFFERS) " + hand_sql).fetchall()
            plans[kind][f"hand_{best_hand[kind]}"] = "\n".join(row[0] for row in rows)
    finally:
        engine.close()
    return plans


def benchmark(url: str, rows: int, repeat: int, passing: bool, plans: bool) -> dict[str, Any]:
    table = ensure_table(url, rows, passing)
    expected = planted(rows, passing)
    runs, engines = approaches(url, table, passing)
    load_before = load_average()
    walls: dict[str, list[float]] = {approach.label: [] for approach in runs}
    try:
        for round_index in range(repeat + 1):  # round 0 reads the table into the buffers
            shift = round_index % len(runs)
            for approach in runs[shift:] + runs[:shift]:
                started = time.perf_counter()
                found = approach.run()
                wall = time.perf_counter() - started
                want = expected[approach.control]
                assert found == want, f"{approach.label} found {found} violations, not {want}"
                if round_index:
                    walls[approach.label].append(wall)
                label = f"round {round_index}/{repeat}" if round_index else "warm-up"
                print(f"  {label:<12} {approach.label:<30} {wall:6.3f} s", flush=True)
    finally:
        for engine in engines:
            engine.close()
    load_after = load_average()
    medians = {label: statistics.median(values) for label, values in walls.items()}
    bests = {label: min(values) for label, values in walls.items()}
    per_control: dict[str, dict[str, Any]] = {}
    for kind in HAND_SQL:
        best = min(HAND_SQL[kind], key=lambda form: medians[f"{kind}/{form}"])
        reflex, hand = f"{kind}/reflex", f"{kind}/{best}"
        ratio = medians[reflex] / medians[hand]
        per_control[kind] = {
            "violations": expected[kind],
            "best_hand": best,
            "reflex_vs_best_hand": round(ratio, 3),
            "reflex_vs_best_hand_best": round(bests[reflex] / bests[hand], 3),
            "met": ratio <= REFLEX_TARGET,
        }
        same = min(SAME_ANSWER_SQL[kind], key=lambda form: medians[f"{kind}/{form}"])
        per_control[kind]["best_same_answer"] = same
        per_control[kind]["reflex_vs_best_same_answer"] = round(
            medians[reflex] / medians[f"{kind}/{same}"], 3
        )
        sampled = f"{kind}/{HAND_SAMPLE_SQL[kind][0]}_{WITH_SAMPLE}"
        if sampled in medians:
            per_control[kind]["reflex_vs_hand_with_sample"] = round(
                medians[reflex] / medians[sampled], 3
            )
    result = {
        "benchmark": f"postgres controls{', passing' if passing else ''}",
        "rows": rows,
        "passing": passing,
        "duplicate_every": DUPLICATE_EVERY,
        "repeat": repeat,
        "table": table,
        "median_seconds": {label: round(value, 4) for label, value in medians.items()},
        "best_seconds": {label: round(value, 4) for label, value in bests.items()},
        "runs_seconds": {label: [round(v, 4) for v in values] for label, values in walls.items()},
        "controls": per_control,
        "target": REFLEX_TARGET,
        "set_up_seconds": {
            name: round(value, 5) for name, value in set_up_costs(url, table, repeat).items()
        },
        "server": server_settings(url),
        "load_average": {"before": load_before, "after": load_after},
        "machine": machine_info("psycopg", "sqlglot"),
    }
    if plans:
        result["explain"] = explain(
            url, table, {kind: figures["best_hand"] for kind, figures in per_control.items()}
        )
    return result


def print_summary(result: dict[str, Any]) -> None:
    medians, bests = result["median_seconds"], result["best_seconds"]
    print(f"\n{result['benchmark']} on {result['rows']:,} rows, {result['repeat']} rounds")
    print(f"{'approach':<32}{'median s':>10}{'best s':>10}")
    for label in medians:
        print(f"{label:<32}{medians[label]:>10.4f}{bests[label]:>10.4f}")
    for kind, figures in result["controls"].items():
        print(
            f"{kind}: reflex / {figures['best_hand']} = {figures['reflex_vs_best_hand']}x median, "
            f"{figures['reflex_vs_best_hand_best']}x best "
            f"({'met' if figures['met'] else 'MISSED'} <= {result['target']}x); "
            f"vs {figures['best_same_answer']} (rows and violations, as Reflex): "
            f"{figures['reflex_vs_best_same_answer']}x"
            + (
                f"; vs the count then its sample: {figures['reflex_vs_hand_with_sample']}x"
                if "reflex_vs_hand_with_sample" in figures
                else ""
            )
        )
    load, cores = result["load_average"], result["machine"]["nproc"] or 1
    if max(load.values()) > cores / 2:
        print(f"warning: load average {load} on {cores} cores, wall times are noisy")
    for kind, plans in result.get("explain", {}).items():
        for label, plan in plans.items():
            print(f"\n-- {kind} {label}\n{plan}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--passing", action="store_true", help="a table with no violation")
    parser.add_argument(
        "--url",
        default=os.environ.get("REFLEX_POSTGRES_URL"),
        help="the server (default: REFLEX_POSTGRES_URL, else a fresh loopback cluster)",
    )
    parser.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE both sides")
    args = parser.parse_args()
    if args.rows < DUPLICATE_EVERY or args.repeat < 1:
        parser.error(f"--rows must be at least {DUPLICATE_EVERY} and --repeat at least 1")
    with server_url(args.url) as url:
        result = benchmark(url, args.rows, args.repeat, args.passing, args.explain)
    print_summary(result)
    print(json.dumps({key: value for key, value in result.items() if key != "explain"}))


if __name__ == "__main__":
    main()
