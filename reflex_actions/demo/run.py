"""`datahub-reflex demo`: the whole loop, every scenario, on the embedded store, in one command.

It sets up a working folder (store, snapshot histories), then alternates the steward's steps
(written exactly as the DataHub UI would write them) with runs of the real datahub-actions
pipeline (the `reflex-lite` change feed source and the `reflex` action) until each step's
events are handled, and prints the chain. It succeeds only if each scenario's incident A
produced a control that raised incident B on another dataset.

The scenarios are ``SCENARIOS`` (one per lesson kind the demo shows, by a short stable name);
one more scenario is one more entry there.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from datahub.metadata.schema_classes import (
    AuditStampClass,
    CorpUserStatusClass,
    IncidentInfoClass,
)
from datahub_actions.pipeline.pipeline import Pipeline

from reflex_actions.action import report as action_report
from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.action.report import ReflexReport
from reflex_actions.bounded import excerpt
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.ingestion import landed_operation
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.cli.lessons import terminal_text
from reflex_actions.cli.site import write_site
from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.demo.history import (
    HISTORIES,
    INVOICES_INCIDENT,
    LANDING_DAY,
    LANDING_FOLDER,
    ORDER_LINES_INCIDENT,
    ORDERS_INCIDENT,
    OWNERSHIP_INCIDENT,
    PARTIAL_LOAD_INCIDENT,
    PAYMENTS_INCIDENT,
    RENAMED_COLUMN_INCIDENT,
    STALE_INCIDENT,
    TODAY,
    generate_histories,
    landing_snapshot,
    todays_load,
)
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.errors import ReflexError
from reflex_actions.handlers import gates
from reflex_actions.handlers.lesson_store import (
    as_text,
    lesson_urn_for,
    load_lesson,
    structured_values,
)
from reflex_actions.lessons.model import Lesson
from reflex_actions.report.markdown import plain, table_cells
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.source.schedule_tick import SCHEDULE_TICK_EVENT_TYPE
from reflex_actions.vocabulary import (
    APPROVAL,
    OWNERSHIP_CHANGE_APPROVAL,
    PROPOSED_OWNER,
    ROOT_CAUSE_STATUS,
    SCOPE,
    display_name,
)

#: how often the demo's freshness controls are judged (the shipped embedded default)
SCHEDULE_INTERVAL = "1h"
ROUTED_ASPECTS = [
    {"entityType": "incident", "aspectName": "incidentInfo"},
    {"entityType": "glossaryTerm", "aspectName": "structuredProperties"},
    {"entityType": "dataset", "aspectName": "operation"},
    {"entityType": "dataset", "aspectName": "datasetProfile"},
    {"entityType": "dataset", "aspectName": "schemaMetadata"},
    {"entityType": "dataset", "aspectName": "structuredProperties"},
    {"entityType": "corpuser", "aspectName": "corpUserStatus"},
]
STEWARD, INTRUDER, HR_ADMIN = user_urn("alice"), user_urn("maria"), user_urn("henry")
PAYMENTS_NOTE = (
    "Made the payments loader idempotent: it now upserts on transaction_id, so a batch retried "
    "after a timeout no longer re-inserts rows that were already committed. Deduplicated the table."
)
#: The report lines the demo prints: candidates with their reasons, exclusions, headline
#: metrics, one row per dataset and the timelines (not every snapshot's row); a table's rows
#: under its header. (A name is markdown there: an escaped character may be any character.)
SUMMARY_LINE = re.compile(
    r"^(\*\*Recommended scope|\| (\\.|[^\\|])+ \| \d\.\d\d \||- (\\.|[\w.])+: |"
    r"\| (precision|recall|true) |\| (\\.|[^\\|])+ \| \d+ \| \d+ \||- `)"
)
OWNERSHIP_NOTE = "Reassigned technical ownership of finance.payments to carol after bob left."
ORDERS_NOTE = (
    "Checkout now creates the customer before it writes the order; the guest orders of "
    "2026-09-17 were backfilled with their customer_id."
)
INVOICES_NOTE = (
    "Billing now reads the orders from the primary and invoices only committed orders; the "
    "invoices of the rolled-back orders of 2026-09-20 were voided."
)
ORDER_LINES_NOTE = (
    "The order pipeline now rejects lines with a quantity below one; the removed-item lines of "
    "2026-09-24 were deleted."
)
PARTIAL_LOAD_NOTE = (
    "The payments loader now commits a day's file in one transaction, so a timeout loads "
    "nothing and pages the owner; the missing half of 2026-09-14 was reloaded."
)
STALE_NOTE = (
    "Restarted the ledger posting job; it now fails loudly and pages the owner when a run "
    "does not finish."
)
#: the estate datasets with a snapshot history (which the demo can load today)
HISTORY_DATASETS = tuple(history.dataset for history in HISTORIES)
#: how often the demo's idle source ticks the schedule (once per demo pipeline run)
TICK_SECONDS = 3600
RENAMED_COLUMN_NOTE = (
    "Reverted the checkout release; column renames now go through a deprecation period in "
    "which both names are written."
)


def summary_lines(report: str) -> list[str]:
    """The lines of a proposal report (markdown) the demo prints, as the text they show: those
    ``SUMMARY_LINE`` picks, a table's under its header, in aligned columns."""
    lines: list[str] = []
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in [*report.splitlines(), ""]:  # the empty line ends a last table
        if not line.startswith("|"):
            lines += aligned([header, *rows]) if header and rows else []
            header, rows = None, []
            lines += [plain(line)] if SUMMARY_LINE.match(line) else []
        elif header is None:
            header = table_cells(line)
        elif SUMMARY_LINE.match(line) and (cells := table_cells(line)) is not None:
            rows.append(cells)
    return lines


def aligned(rows: list[list[str]]) -> list[str]:
    """A table's rows as terminal lines: each column but the last as wide as its widest cell."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    widths[-1] = 0  # the last column is not padded: its text runs on
    return ["  ".join(cell.ljust(widths[n]) for n, cell in enumerate(row)) for row in rows]


def embedded_pipeline_config(workdir: Path) -> dict[str, Any]:
    """The pipeline of action_configs/reflex-embedded.yaml, for a demo working folder."""
    store, snapshots = workdir / "reflex.db", workdir / "snapshots"
    landing = snapshots / LANDING_FOLDER
    return {
        "name": "datahub-reflex-embedded",
        "source": {"type": "reflex-lite", "config": {"store": str(store), "stop_when_idle": True}},
        "filters": [
            {
                "type": "event_type",
                "config": {
                    "filter": {
                        "MetadataChangeLogEvent_v1": {"event": ROUTED_ASPECTS},
                        SCHEDULE_TICK_EVENT_TYPE: None,
                    }
                },
            }
        ],
        "action": {
            "type": "reflex",
            "config": {
                "store": str(store),
                "approvers": {
                    "users": [STEWARD],
                    "groups": ["urn:li:corpGroup:finance-stewards"],
                },
                "histories": {"root": str(snapshots)},
                "landing": {
                    "allowed_roots": [str(landing)],
                    "locator": f"{landing}/{{name}}/{{snapshot_id}}.parquet",
                },
                "schedule": {"interval": SCHEDULE_INTERVAL},
            },
        },
        "options": {
            "retry_count": 0,
            "failure_mode": "CONTINUE",
            "failed_events_dir": str(workdir / "failed-events"),
        },
    }


@dataclass
class Demo:
    workdir: Path
    say: Callable[[str], None]

    def __post_init__(self) -> None:
        self.catalog = LiteCatalog(self.workdir / "reflex.db")
        self.config = embedded_pipeline_config(self.workdir)
        self.clock = int(time.time() * 1000)
        #: what every pipeline run of this demo did, per route
        self.report = ReflexReport()

    def react(self, ticks: bool = False) -> None:
        """Let the reflex pipeline handle every change written so far; with ``ticks``, the
        source also ticks the schedule once it is idle (as the embedded runtime does)."""
        config = self.config
        if ticks:
            source = {**config["source"], "config": {**config["source"]["config"]}}
            source["config"]["tick_interval_seconds"] = TICK_SECONDS
            config = {**config, "source": source}
        pipeline = Pipeline.create(config)
        try:
            pipeline.run()
        finally:
            pipeline.close()
            assert isinstance(pipeline.action, ReflexAction)
            self.report.add(pipeline.action.get_report())

    def tick(self) -> int:
        self.clock += 1000
        return self.clock

    def lesson(self, incident: str) -> Lesson:
        lesson = load_lesson(self.catalog, lesson_urn_for(incident))
        assert lesson is not None, f"no lesson was drafted for {incident}"
        return lesson

    def steward_sets(self, urn: str, prop: str, value: str, actor: str = STEWARD) -> None:
        self.say(
            f"  {display_name(actor)} sets {display_name(prop)} = {value} on {display_name(urn)}"
        )
        self.catalog.set_structured_properties(urn, {prop: [value]}, actor)
        self.react()

    def recurrences(self, lesson: Lesson, source: str) -> list[dict[str, Any]]:
        found = [r for r in self.lesson(lesson.incident).recurrences if r.dataset != source]
        for r in found:
            info = self.catalog.get_aspect(r.incident, IncidentInfoClass)
            assert info is not None
            self.say(f"  incident B {r.incident} on {display_name(r.dataset)}")
            self.say(f"    {info.title}")
            self.say(
                f"    source: {info.source.type} {info.source.sourceUrn}" if info.source else ""
            )
        return found

    def show_proposal(self, lesson: Lesson) -> None:
        self.say(f"  lesson {lesson.urn}: {lesson.state.value}")
        self.say(f"  root cause: {lesson.root_cause}")
        self.say(f"  control: {lesson.control}")
        self.say(f"  proposer: {lesson.proposer.name}, confidence {lesson.confidence:.0%}")

    def show_report(self, lesson: Lesson) -> None:
        scope = ", ".join(
            display_name(str(u)) for u in structured_values(self.catalog, lesson.urn, SCOPE)
        )
        approval = structured_values(self.catalog, lesson.urn, APPROVAL)
        self.say(f"  approval: {approval}; scope pre-filled: {scope}")
        for line in summary_lines(lesson.report):
            self.say("    " + line)

    def resolve(self, incident: str, note: str, dataset: str) -> Lesson:
        """Step 1: the steward resolves incident A; Reflex drafts its lesson."""
        self.say(
            f"[1] {display_name(STEWARD)} resolves incident A ({incident}) on "
            f"{display_name(dataset)}"
        )
        resolve_incident(self.catalog, incident, note, STEWARD)
        self.react()
        lesson = self.lesson(incident)
        self.show_proposal(lesson)
        return lesson

    def confirm(self, lesson: Lesson) -> Lesson:
        """Human gate 1: the root cause is confirmed; Reflex finds similar assets, backtests."""
        self.say("[2] human gate 1: the root cause is confirmed")
        self.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        lesson = self.lesson(lesson.incident)
        self.say("  similar assets and backtest:")
        self.show_report(lesson)
        return lesson

    def approve(self, lesson: Lesson) -> Lesson:
        """Human gate 2: the steward approves the scope; Reflex publishes the control there."""
        self.say("[3] human gate 2: the steward approves the scope")
        self.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = self.lesson(lesson.incident)
        self.say(f"  published on: {', '.join(display_name(u) for u in lesson.published_scope)}")
        return lesson

    def land(self, name: str) -> None:
        """New data lands on estate dataset ``name``: its landing-day snapshot, announced by
        an ``operation`` as the loader would write it."""
        snapshot = landing_snapshot(self.workdir / "snapshots", name)
        self.say(f"[4] new data lands on {name}: {snapshot.name}")
        landed = landed_operation(
            dataset_urn(name), snapshot, DEFAULT_ACTOR, self.tick(), LANDING_DAY.isoformat()
        )
        self.catalog.emit([landed])
        self.react()

    def load_today(self, names: Sequence[str]) -> None:
        """Today's loads of these estate datasets land (their landing-day data, moved to today),
        each announced by an ``operation``."""
        now = datetime.fromtimestamp(self.tick() / 1000, UTC).replace(tzinfo=None)
        self.say(f"[4] today's loads land on {', '.join(names)}")
        operations = []
        for name in names:
            snapshot = todays_load(self.workdir / "snapshots", name, now)
            operations.append(
                landed_operation(dataset_urn(name), snapshot, DEFAULT_ACTOR, self.tick(), TODAY)
            )
        self.catalog.emit(operations)
        self.react()

    def schedule_ticks(self) -> None:
        """The embedded source, idle, ticks the schedule: what is due is judged now."""
        self.say("[5] the schedule ticks (the embedded source's idle tick): freshness is judged")
        self.react(ticks=True)


def _refused_then_approved(demo: Demo, lesson: Lesson) -> Lesson:
    """Human gate 2, showing its guard: an unauthorized user's approval is refused and
    reverted; then the steward approves."""
    demo.say("[3] human gate 2: an unauthorized user tries to approve")
    with _not_logged(gates.__name__):  # the refusal the demo stages: told below, in its words
        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED", actor=INTRUDER)
    refused = demo.lesson(lesson.incident)
    approval = as_text(structured_values(demo.catalog, lesson.urn, APPROVAL))
    demo.say(f"    -> still {refused.state.value}, reflex.approval back to {approval}:")
    demo.say(f"       {refused.decisions[-1].decision}: {refused.decisions[-1].detail}")
    return demo.approve(lesson)


def _on_landed_data(
    incident: str,
    note: str,
    source: str,
    lands_on: str,
    gate_2: Callable[[Demo, Lesson], Lesson] = Demo.approve,
) -> Callable[[Demo], bool]:
    """A scenario whose control runs when data lands: incident A on estate dataset ``source``
    is resolved with ``note``, its lesson confirmed as drafted and passed through ``gate_2``,
    then the landing day's load of ``lands_on`` lands; it closes when that raises incident B
    on a dataset other than ``source``."""

    def play(demo: Demo) -> bool:
        lesson = demo.confirm(demo.resolve(incident, note, dataset_urn(source)))
        lesson = gate_2(demo, lesson)
        demo.land(lands_on)
        return bool(demo.recurrences(lesson, dataset_urn(source)))

    return play


#: incident A's lesson proves itself where the retried load lands next: the ledger
_duplicates = _on_landed_data(
    PAYMENTS_INCIDENT,
    PAYMENTS_NOTE,
    "finance.payments",
    "finance.ledger_entries",
    gate_2=_refused_then_approved,
)
#: a guest order's NULL customer_id recurs where invoices copy it from the orders
_missing_values = _on_landed_data(ORDERS_INCIDENT, ORDERS_NOTE, "sales.orders", "sales.invoices")
#: a negative quantity recurs where the returns desk books returned lines
_invalid_values = _on_landed_data(
    ORDER_LINES_INCIDENT, ORDER_LINES_NOTE, "sales.order_lines", "sales.returns"
)
#: invoices of rolled-back orders recur where the order pipeline replays the same stale replica
_orphaned_references = _on_landed_data(
    INVOICES_INCIDENT, INVOICES_NOTE, "sales.invoices", "sales.order_lines"
)

#: a partial load recurs where the refunds loader (fed by the same gateway) times out
_missing_rows = _on_landed_data(
    PARTIAL_LOAD_INCIDENT, PARTIAL_LOAD_NOTE, "finance.payments", "finance.refunds"
)
#: the renamed order total breaks the invoices, which copy it from the orders
_schema_change = _on_landed_data(
    RENAMED_COLUMN_INCIDENT, RENAMED_COLUMN_NOTE, "sales.orders", "sales.invoices"
)


def _stale_data(demo: Demo) -> bool:
    """The ledger posting job stopped; the lesson is published on the tables fed by the same
    payments; today the payouts loader has stopped too, and only the schedule can see it."""
    source = dataset_urn("finance.ledger_entries")
    lesson = demo.approve(demo.confirm(demo.resolve(STALE_INCIDENT, STALE_NOTE, source)))
    landed = [name for name in HISTORY_DATASETS if dataset_urn(name) in lesson.published_scope]
    demo.load_today(landed)
    demo.say("    (the payouts loader has stopped: its table still holds last week's payouts)")
    demo.schedule_ticks()
    payouts = dataset_urn("finance.payouts")
    return any(r.dataset == payouts for r in demo.recurrences(lesson, source))


def _ownership(demo: Demo) -> bool:
    say = demo.say
    payments = dataset_urn("finance.payments")
    lesson = demo.resolve(OWNERSHIP_INCIDENT, OWNERSHIP_NOTE, payments)
    say(f"  departed: {', '.join(display_name(u) for u in lesson.departed_users)}")
    lesson = demo.approve(demo.confirm(lesson))
    dave = user_urn("dave")
    say(f"[4] {display_name(dave)} leaves: {display_name(HR_ADMIN)} suspends the account")
    status = CorpUserStatusClass(
        status="SUSPENDED", lastModified=AuditStampClass(demo.tick(), HR_ADMIN)
    )
    demo.catalog.emit([acting_as(HR_ADMIN, dave, status)])
    demo.react()
    found = demo.recurrences(lesson, payments)
    lesson = demo.lesson(OWNERSHIP_INCIDENT)
    for dataset, proposal in list(lesson.ownership_proposals.items()):
        owner = ", ".join(str(v) for v in structured_values(demo.catalog, dataset, PROPOSED_OWNER))
        say(f"  reflex.proposedOwner on {display_name(dataset)}: {owner} ({proposal.reason})")
        say(f"[5] the steward approves the owner change on {display_name(dataset)}")
        demo.steward_sets(dataset, OWNERSHIP_CHANGE_APPROVAL, "APPROVED")
        owners = demo.catalog.dataset(dataset).owners  # type: ignore[union-attr]
        listed = ", ".join(f"{display_name(o.owner)} ({o.ownership_type})" for o in owners)
        say(f"  owners now: {listed}")
    return bool(found)


@dataclass(frozen=True)
class Scenario:
    """One story of the demo: what it shows (its heading and result line) and how it plays."""

    heading: str
    outcome: str
    play: Callable[[Demo], bool]


#: The demo's scenarios by their stable names (``datahub-reflex demo --scenario NAME``), in
#: the order the default run plays them.
SCENARIOS: dict[str, Scenario] = {
    "duplicates": Scenario(
        "duplicate financial rows from a non-idempotent retry",
        "duplicate rows",
        _duplicates,
    ),
    "ownership": Scenario(
        "orphaned ownership after an employee leaves", "orphaned ownership", _ownership
    ),
    "missing-values": Scenario(
        "orders written without their customer (NULL customer_id)",
        "missing values",
        _missing_values,
    ),
    "invalid-values": Scenario(
        "order lines with a negative quantity", "invalid values", _invalid_values
    ),
    "orphaned-references": Scenario(
        "invoices of orders that do not exist", "orphaned references", _orphaned_references
    ),
    "missing-rows": Scenario(
        "a partial load: the loader timed out and committed half a day",
        "missing rows",
        _missing_rows,
    ),
    "schema-change": Scenario(
        "an upstream column rename that breaks a downstream", "schema change", _schema_change
    ),
    "stale-data": Scenario("a loader that silently stopped: stale data", "stale data", _stale_data),
}


class UnknownScenarioError(ReflexError):
    """A scenario name the demo does not have."""


def scenarios_named(names: Sequence[str] | None) -> dict[str, Scenario]:
    """The scenarios of these names in the order given (all of them for None); an unknown
    name is refused with the names there are."""
    if names is None:
        return dict(SCENARIOS)
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise UnknownScenarioError(
            f"unknown scenario {excerpt(unknown[0])}; the scenarios are: {', '.join(SCENARIOS)}"
        )
    return {name: SCENARIOS[name] for name in names}


@contextmanager
def _not_logged(name: str) -> Iterator[None]:
    """Within the block, logger ``name`` logs errors only: what it would warn of, the demo
    tells in its own words (every other logger still warns)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _shown_on_a_terminal(say: Callable[[str], None]) -> Callable[[str], None]:
    """``say`` for a terminal: a control character a name or a note of the estate holds (an
    escape sequence) is shown as its escape."""
    return lambda text: say(terminal_text(text))


def run_demo(
    workdir: Path, say: Callable[[str], None] = print, scenarios: Sequence[str] | None = None
) -> bool:
    """Run the named scenarios (default: all) in ``workdir`` (created if needed); True when
    each closed its loop."""
    selected = scenarios_named(scenarios)
    say = _shown_on_a_terminal(say)
    started = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    for noisy in ("datahub_actions", "reflex_actions"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    say(f"Setting up the embedded store and snapshot histories in {workdir}")
    generate_histories(workdir / "snapshots")
    demo = Demo(workdir, say)
    # each pipeline's action logs its report when it closes: the demo prints them summed, once
    with _not_logged(action_report.__name__):
        demo.catalog.emit([*bootstrap_mcps(), *estate_mcps()])
        demo.react()  # the initial load changes nothing Reflex acts on
        results = {}
        for number, scenario in enumerate(selected.values(), start=1):
            say(f"\n== Scenario {number}: {scenario.heading} ==")
            results[scenario.outcome] = scenario.play(demo)
    say("\n== What the reflex action did, per route ==")
    say(demo.report.as_text())
    site = write_site(demo.catalog, workdir / "site")
    say(f"\n== Site ==\n  open {site['index']} in a browser")
    say("\n== Result ==")
    for scenario, closed in results.items():
        outcome = "incident A -> lesson -> control -> incident B on another dataset"
        say(f"  {scenario}: {outcome if closed else 'LOOP NOT CLOSED'}")
    say(f"  {time.perf_counter() - started:.1f} s")
    demo.catalog.close()
    return all(results.values())
