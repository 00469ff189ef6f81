"""`datahub-reflex demo`: the whole loop, both scenarios, on the embedded store, in one command.

It sets up a working folder (store, snapshot histories), then alternates the steward's steps
(written exactly as the DataHub UI would write them) with runs of the real datahub-actions
pipeline (the `reflex-lite` change feed source and the `reflex` action) until each step's
events are handled, and prints the chain. It succeeds only if each scenario's incident A
produced a control that raised incident B on another dataset.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datahub.metadata.schema_classes import (
    AuditStampClass,
    CorpUserStatusClass,
    IncidentInfoClass,
    OperationClass,
    OperationTypeClass,
)
from datahub_actions.pipeline.pipeline import Pipeline

from reflex_actions.action import report as action_report
from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.action.report import ReflexReport
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.demo.estate import dataset_urn, user_urn
from reflex_actions.demo.history import (
    LANDING_DAY,
    LANDING_FOLDER,
    OWNERSHIP_INCIDENT,
    PAYMENTS_INCIDENT,
    generate_histories,
)
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.handlers.lesson_store import (
    as_text,
    lesson_urn_for,
    load_lesson,
    structured_values,
)
from reflex_actions.lessons.model import Lesson
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.vocabulary import (
    APPROVAL,
    OWNERSHIP_CHANGE_APPROVAL,
    PROPOSED_OWNER,
    ROOT_CAUSE_STATUS,
    SCOPE,
    display_name,
)

ROUTED_ASPECTS = [
    {"entityType": "incident", "aspectName": "incidentInfo"},
    {"entityType": "glossaryTerm", "aspectName": "structuredProperties"},
    {"entityType": "dataset", "aspectName": "operation"},
    {"entityType": "dataset", "aspectName": "structuredProperties"},
    {"entityType": "corpuser", "aspectName": "corpUserStatus"},
]
STEWARD, INTRUDER, HR_ADMIN = user_urn("alice"), user_urn("maria"), user_urn("henry")
PAYMENTS_NOTE = (
    "Made the payments loader idempotent: it now upserts on transaction_id, so a batch retried "
    "after a timeout no longer re-inserts rows that were already committed. Deduplicated the table."
)
#: The report lines the demo prints: candidates with their reasons, exclusions, headline
#: metrics, one row per dataset and the timelines (not every snapshot's row).
SUMMARY_LINE = re.compile(
    r"^(\*\*Recommended scope|\| [^|]+ \| \d\.\d\d \||- [\w.]+: |\| (precision|recall|true) |"
    r"\| [^|]+ \| \d+ \| \d+ \||- `)"
)
OWNERSHIP_NOTE = "Reassigned technical ownership of finance.payments to carol after bob left."


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
                "config": {"filter": {"MetadataChangeLogEvent_v1": {"event": ROUTED_ASPECTS}}},
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

    def react(self) -> None:
        """Let the reflex pipeline handle every change written so far."""
        pipeline = Pipeline.create(self.config)
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
        for line in lesson.report.splitlines():
            if SUMMARY_LINE.match(line):
                self.say("    " + line)


def _duplicates(demo: Demo) -> bool:
    say = demo.say
    payments = dataset_urn("finance.payments")
    say("\n== Scenario 1: duplicate financial rows from a non-idempotent retry ==")
    say(
        f"[1] {display_name(STEWARD)} resolves incident A ({PAYMENTS_INCIDENT}) on finance.payments"
    )
    resolve_incident(demo.catalog, PAYMENTS_INCIDENT, PAYMENTS_NOTE, STEWARD)
    demo.react()
    lesson = demo.lesson(PAYMENTS_INCIDENT)
    demo.show_proposal(lesson)
    say("[2] human gate 1: the root cause is confirmed")
    demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
    lesson = demo.lesson(PAYMENTS_INCIDENT)
    say("  similar assets and backtest:")
    demo.show_report(lesson)
    say("[3] human gate 2: an unauthorized user tries to approve; then the steward approves")
    demo.steward_sets(lesson.urn, APPROVAL, "APPROVED", actor=INTRUDER)
    refused = demo.lesson(PAYMENTS_INCIDENT)
    approval = as_text(structured_values(demo.catalog, lesson.urn, APPROVAL))
    say(f"    -> still {refused.state.value}, reflex.approval back to {approval}:")
    say(f"       {refused.decisions[-1].decision}: {refused.decisions[-1].detail}")
    demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
    lesson = demo.lesson(PAYMENTS_INCIDENT)
    say(f"  published on: {', '.join(display_name(u) for u in lesson.published_scope)}")
    ledger = dataset_urn("finance.ledger_entries")
    snapshot = (
        demo.workdir
        / "snapshots"
        / LANDING_FOLDER
        / "finance.ledger_entries"
        / f"{LANDING_DAY}.parquet"
    )
    say(f"[4] new data lands on finance.ledger_entries: {snapshot.name}")
    operation = OperationClass(
        timestampMillis=demo.tick(),
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": LANDING_DAY.isoformat()},
        lastUpdatedTimestamp=demo.clock,
    )
    demo.catalog.emit([acting_as(DEFAULT_ACTOR, ledger, operation)])
    demo.react()
    return bool(demo.recurrences(lesson, payments))


def _ownership(demo: Demo) -> bool:
    say = demo.say
    payments = dataset_urn("finance.payments")
    say("\n== Scenario 2: orphaned ownership after an employee leaves ==")
    say(f"[1] {display_name(STEWARD)} resolves incident A ({OWNERSHIP_INCIDENT})")
    resolve_incident(demo.catalog, OWNERSHIP_INCIDENT, OWNERSHIP_NOTE, STEWARD)
    demo.react()
    lesson = demo.lesson(OWNERSHIP_INCIDENT)
    demo.show_proposal(lesson)
    say(f"  departed: {', '.join(display_name(u) for u in lesson.departed_users)}")
    say("[2] human gate 1: the root cause is confirmed")
    demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
    lesson = demo.lesson(OWNERSHIP_INCIDENT)
    demo.show_report(lesson)
    say("[3] human gate 2: the steward approves the scope")
    demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
    lesson = demo.lesson(OWNERSHIP_INCIDENT)
    say(f"  published on: {', '.join(display_name(u) for u in lesson.published_scope)}")
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


@contextmanager
def _reports_not_logged() -> Iterator[None]:
    """Each pipeline's action logs its report when it closes; the demo prints them summed,
    once, instead."""
    report_logger = logging.getLogger(action_report.__name__)
    level = report_logger.level
    report_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        report_logger.setLevel(level)


def run_demo(workdir: Path, say: Callable[[str], None] = print) -> bool:
    """Run both scenarios in ``workdir`` (created if needed); True when both closed the loop."""
    started = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    for noisy in ("datahub_actions", "reflex_actions"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    say(f"Setting up the embedded store and snapshot histories in {workdir}")
    generate_histories(workdir / "snapshots")
    demo = Demo(workdir, say)
    with _reports_not_logged():
        demo.catalog.emit([*bootstrap_mcps(), *estate_mcps()])
        demo.react()  # the initial load changes nothing Reflex acts on
        results = {"duplicate rows": _duplicates(demo), "orphaned ownership": _ownership(demo)}
    say("\n== What the reflex action did, per route ==")
    say(demo.report.as_text())
    say("\n== Result ==")
    for scenario, closed in results.items():
        outcome = "incident A -> lesson -> control -> incident B on another dataset"
        say(f"  {scenario}: {outcome if closed else 'LOOP NOT CLOSED'}")
    say(f"  {time.perf_counter() - started:.1f} s")
    demo.catalog.close()
    return all(results.values())
