"""Drafting and human gate 1 on a real Lite store, driven by the real change-feed events.

Each test writes what DataHub's UI would write (``resolve_incident``, structured property
edits), reads the resulting MetadataChangeLog event from the ``reflex-lite`` feed and hands it
to the handler, as the ``reflex`` action does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    GlossaryTermInfoClass,
    GroupMembershipClass,
    IncidentInfoClass,
    OwnerClass,
    OwnershipClass,
    StructuredPropertiesClass,
)

from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.config import ReflexConfig
from reflex_actions.demo.history import OWNERSHIP_INCIDENT, PAYMENTS_INCIDENT
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext, decide_and_apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.lesson_store import (
    LESSON_PROPERTY,
    lesson_urn_for,
    load_lesson,
    structured_values,
)
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    LESSONS_NODE,
    ROOT_CAUSE,
    ROOT_CAUSE_STATUS,
    SCOPE,
)
from tests.lessons.helpers import (
    ALICE,
    LEDGER,
    MARIA,
    PAYMENTS,
    ChangeFeed,
    copy_store,
    store_rows,
)

LESSON = lesson_urn_for(PAYMENTS_INCIDENT)
NOTE = "Made the payments loader idempotent: it upserts on transaction_id after a timed-out retry."
SERVICE_ACTOR = ReflexConfig().service_actor
FINANCE_STEWARDS = "urn:li:corpGroup:finance-stewards"
ZOE = "urn:li:corpuser:zoe"
GATES_LOGGER = "reflex_actions.handlers.gates"

Confirmation = Callable[["Estate"], AspectChange]


@dataclass
class Estate:
    """A private copy of a prepared store, its change feed, and the demo histories."""

    catalog: LiteCatalog
    feed: ChangeFeed
    histories: Path

    def context(self, *, histories: bool = True, **config: Any) -> HandlerContext:
        """A handler context; alice approves unless ``config`` says otherwise. Without
        histories the proposal skips the backtest (fast), with them it runs it."""
        settings: dict[str, Any] = {"approvers": {"users": [ALICE]}, **config}
        if histories:
            settings["histories"] = {"root": str(self.histories)}
        return HandlerContext(catalog=self.catalog, config=ReflexConfig.model_validate(settings))

    def steward_sets(self, values: dict[str, str], actor: str, urn: str = LESSON) -> AspectChange:
        """A structured property edit on the lesson page; returns its event."""
        self.feed.changes()  # Reflex's own earlier writes: not what this test hands over
        self.catalog.set_structured_properties(urn, {k: [v] for k, v in values.items()}, actor)
        return self.feed.only_change()

    def settle(self, ctx: HandlerContext) -> None:
        """Hand Reflex's own lesson writes since the last drain to the gate handler, as the
        pipeline would (its PENDING is what opens the approval)."""
        for change in self.feed.changes():
            if change.urn == LESSON and change.aspect_name == "structuredProperties":
                decide_and_apply(on_lesson_properties, change, ctx)

    def resolve(self, incident: str = PAYMENTS_INCIDENT, note: str = NOTE) -> AspectChange:
        """alice resolves an incident in the UI; returns its event."""
        resolve_incident(self.catalog, incident, note, ALICE)
        return self.feed.only_change()

    def rows(self) -> list[tuple[Any, ...]]:
        """Every row of the store's aspect table."""
        return store_rows(self.catalog.path)

    def lesson(self, urn: str = LESSON) -> Lesson:
        lesson = load_lesson(self.catalog, urn)
        assert lesson is not None, f"no lesson {urn}"
        return lesson

    def prop(self, property_urn: str, urn: str = LESSON) -> list[str | float]:
        return structured_values(self.catalog, urn, property_urn)

    def lesson_terms(self) -> list[str]:
        """Glossary terms under the lessons node."""
        return sorted(
            row[1]
            for row in self.rows()
            if row[2] == GlossaryTermInfoClass.ASPECT_NAME
            and row[3] == 0
            and LESSONS_NODE in row[4]
        )


def open_estate(prepared: Path, tmp_path: Path, histories: Path) -> Estate:
    catalog = LiteCatalog(copy_store(prepared, tmp_path / "store" / "lite.db"))
    return Estate(catalog, ChangeFeed(catalog.path, tmp_path / "offset.json"), histories)


@pytest.fixture
def estate(estate_store: Path, histories_root: Path, tmp_path: Path) -> Iterator[Estate]:
    """The demo estate with both incidents ACTIVE."""
    world = open_estate(estate_store, tmp_path, histories_root)
    yield world
    world.catalog.close()


@pytest.fixture(scope="module")
def drafted_store(
    estate_store: Path, histories_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The estate after incident A was resolved and its lesson drafted (closed; copy it)."""
    world = open_estate(estate_store, tmp_path_factory.mktemp("drafted"), histories_root)
    decide_and_apply(on_incident_change, world.resolve(), world.context())
    world.catalog.close()
    return world.catalog.path


@pytest.fixture
def drafted(drafted_store: Path, histories_root: Path, tmp_path: Path) -> Iterator[Estate]:
    """The estate with lesson A drafted and PROPOSED."""
    world = open_estate(drafted_store, tmp_path, histories_root)
    yield world
    world.catalog.close()


# --- incident A resolved -> lesson drafted ------------------------------------------------


def test_resolution_drafts_one_lesson_term(estate: Estate) -> None:
    change = estate.resolve()
    assert (change.entity_type, change.aspect_name, change.actor) == (
        "incident",
        "incidentInfo",
        ALICE,
    )

    decide_and_apply(on_incident_change, change, estate.context())

    assert estate.lesson_terms() == [LESSON]
    info = estate.catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert info is not None
    assert info.parentNode == LESSONS_NODE
    assert info.customProperties["reflex.incident"] == PAYMENTS_INCIDENT
    lesson = Lesson.model_validate_json(info.customProperties[LESSON_PROPERTY])
    assert lesson.state is LessonState.PROPOSED
    assert lesson.incident == PAYMENTS_INCIDENT
    assert lesson.source_dataset == PAYMENTS
    assert lesson.control == {"type": "uniqueness", "field": "transaction_id"}
    assert "transaction_id" in info.definition
    assert estate.prop(ROOT_CAUSE_STATUS) == ["PROPOSED"]
    assert estate.prop(ROOT_CAUSE) == [lesson.root_cause]
    assert estate.prop(CONTROL_SPEC) == ["{type: uniqueness, field: transaction_id}"]
    assert estate.prop(APPROVAL) == []


def test_redelivered_resolution_changes_nothing(estate: Estate) -> None:
    """The lesson urn derives from the incident: a second delivery finds it and stops."""
    change = estate.resolve()
    ctx = estate.context()
    decide_and_apply(on_incident_change, change, ctx)
    after_first = estate.rows()

    decide_and_apply(on_incident_change, change, ctx)

    assert estate.rows() == after_first
    assert estate.lesson_terms() == [LESSON]


def test_resolution_of_the_ownership_incident_drafts_its_own_lesson(estate: Estate) -> None:
    decide_and_apply(
        on_incident_change,
        estate.resolve(OWNERSHIP_INCIDENT, "carol owns it now."),
        estate.context(),
    )

    lesson = estate.lesson(lesson_urn_for(OWNERSHIP_INCIDENT))
    assert lesson.failure_pattern == "orphaned_ownership"
    assert lesson.departed_users == ["urn:li:corpuser:bob"]
    assert estate.lesson_terms() == [lesson_urn_for(OWNERSHIP_INCIDENT)]


def _active_to_active(estate: Estate) -> AspectChange:
    info = estate.catalog.get_aspect(PAYMENTS_INCIDENT, IncidentInfoClass)
    assert info is not None
    info.description = f"{info.description} Still investigating."
    estate.catalog.emit([acting_as(ALICE, PAYMENTS_INCIDENT, info)])
    return estate.feed.only_change()


def _resolved_to_resolved(estate: Estate) -> AspectChange:
    estate.resolve()
    return estate.resolve(note="Resolved again, with a better note.")


@pytest.mark.parametrize(
    "transition", [_active_to_active, _resolved_to_resolved], ids=["active", "resolved"]
)
def test_a_non_transition_does_nothing(estate: Estate, transition: Confirmation) -> None:
    """Only ACTIVE -> RESOLVED drafts a lesson."""
    change = transition(estate)
    assert change.typed(IncidentInfoClass, previous=True) is not None
    before = estate.rows()

    decide_and_apply(on_incident_change, change, estate.context())

    assert estate.rows() == before
    assert estate.lesson_terms() == []


# --- human gate 1: confirmed ----------------------------------------------------------------


def test_confirmed_by_an_approver_proposes_the_lesson(drafted: Estate) -> None:
    """Confirmation compiles the control, resolves similar assets, backtests on the histories
    and waits for approval with the scope pre-filled."""
    ctx = drafted.context()
    change = drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ALICE)

    decide_and_apply(on_lesson_properties, change, ctx)

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.validation_error is None
    assert drafted.prop(APPROVAL) == ["PENDING"]
    scope = drafted.prop(SCOPE)
    assert scope[0] == PAYMENTS
    assert LEDGER in scope
    assert len(scope) == len(set(scope))
    assert '"transaction_id"' in lesson.report
    assert "Backtest" in lesson.report and "finance.payments" in lesson.report
    assert [(d.decision, d.actor) for d in lesson.decisions] == [("root cause confirmed", ALICE)]
    info = drafted.catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert info is not None and "PENDING_APPROVAL" in info.definition

    # the same event redelivered: the lesson is past confirmation, nothing is written
    after = drafted.rows()
    decide_and_apply(on_lesson_properties, change, ctx)
    assert drafted.rows() == after


def test_edited_control_spec_and_root_cause_are_respected(drafted: Estate) -> None:
    ctx = drafted.context(histories=False)
    edits = {
        CONTROL_SPEC: "type: uniqueness\nfields: [transaction_id, account_id]\n",
        ROOT_CAUSE: "The loader retried a committed batch (edited by the steward).",
    }
    decide_and_apply(
        on_lesson_properties, drafted.steward_sets(edits, ALICE), ctx
    )  # an edit alone decides nothing
    assert drafted.lesson().state is LessonState.PROPOSED

    decide_and_apply(
        on_lesson_properties, drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ALICE), ctx
    )

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.control == {"type": "uniqueness", "fields": ["transaction_id", "account_id"]}
    assert lesson.root_cause == edits[ROOT_CAUSE]
    assert '"transaction_id"' in lesson.report and '"account_id"' in lesson.report  # the SQL


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("type: uniqueness\nfield: txn_uuid\n", "'txn_uuid'"),
        ("type: uniqueness\nfield: [transaction_id\n", "not valid YAML"),
        ("type: distribution_drift\nmax_shift: 24\n", "unknown control type 'distribution_drift'"),
        ("type: active_ownership\nmin_active_owners: 1\n", "does not fit failure pattern"),
        ("   ", "reflex.controlSpec is empty"),
    ],
    ids=["missing-field", "yaml-garbage", "unknown-type", "wrong-type", "empty"],
)
def test_invalid_edit_sends_the_lesson_back_to_proposed(
    drafted: Estate, spec: str, error: str
) -> None:
    ctx = drafted.context(histories=False)
    drafted.steward_sets({CONTROL_SPEC: spec}, ALICE)

    decide_and_apply(
        on_lesson_properties, drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ALICE), ctx
    )

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PROPOSED
    assert lesson.validation_error is not None and error in lesson.validation_error
    assert lesson.control == {"type": "uniqueness", "field": "transaction_id"}  # the draft's
    assert drafted.prop(ROOT_CAUSE_STATUS) == ["PROPOSED"]
    assert drafted.prop(APPROVAL) == []
    info = drafted.catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert info is not None and lesson.validation_error in info.definition
    assert lesson.decisions[-1].decision == "confirmation refused"


def test_a_fixed_edit_is_accepted_after_a_refusal(drafted: Estate) -> None:
    ctx = drafted.context(histories=False)
    drafted.steward_sets({CONTROL_SPEC: "type: uniqueness\nfield: txn_uuid\n"}, ALICE)
    decide_and_apply(
        on_lesson_properties, drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ALICE), ctx
    )
    assert drafted.lesson().validation_error is not None

    drafted.steward_sets({CONTROL_SPEC: "type: uniqueness\nfield: account_id\n"}, ALICE)
    decide_and_apply(
        on_lesson_properties, drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ALICE), ctx
    )

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.validation_error is None
    assert lesson.control == {"type": "uniqueness", "field": "account_id"}
    info = drafted.catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert info is not None and "Needs a fix" not in info.definition


# --- human gate 1: rejected -------------------------------------------------------------------


def _reject_root_cause(estate: Estate, ctx: HandlerContext) -> None:
    decide_and_apply(
        on_lesson_properties, estate.steward_sets({ROOT_CAUSE_STATUS: "REJECTED"}, ALICE), ctx
    )


def _reject_scope(estate: Estate, ctx: HandlerContext) -> None:
    decide_and_apply(
        on_lesson_properties, estate.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ALICE), ctx
    )
    assert estate.lesson().state is LessonState.PENDING_APPROVAL
    decide_and_apply(on_lesson_properties, estate.steward_sets({APPROVAL: "REJECTED"}, ALICE), ctx)


@pytest.mark.parametrize("reject", [_reject_root_cause, _reject_scope], ids=["root-cause", "scope"])
def test_a_rejected_lesson_never_publishes(
    drafted: Estate, reject: Callable[[Estate, HandlerContext], None]
) -> None:
    """A rejection ends the lesson: a later approval publishes nothing and writes nothing."""
    ctx = drafted.context(histories=False)
    reject(drafted, ctx)
    lesson = drafted.lesson()
    assert lesson.state is LessonState.REJECTED
    assert lesson.decisions[-1].actor == ALICE

    approved = drafted.steward_sets({APPROVAL: "APPROVED"}, ALICE)
    before = drafted.rows()
    decide_and_apply(on_lesson_properties, approved, ctx)

    assert drafted.rows() == before
    assert drafted.lesson().state is LessonState.REJECTED
    assert drafted.lesson().published_scope == []
    assert not [row for row in before if str(row[1]).startswith("urn:li:assertion:")]


# --- authorization ---------------------------------------------------------------------------


def _by(actor: str | None) -> Confirmation:
    """CONFIRMED set by ``actor`` (None: an event that names nobody)."""

    def confirm(estate: Estate) -> AspectChange:
        change = estate.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, actor or ALICE)
        return change if actor else dataclasses.replace(change, actor=None)

    return confirm


def _without_actor_metadata(estate: Estate) -> AspectChange:
    """A write that names no user: the feed reports DataHub's default user, as GMS would."""
    estate.feed.changes()
    current = estate.catalog.get_aspect(LESSON, StructuredPropertiesClass)
    assert current is not None
    for assignment in current.properties:
        if assignment.propertyUrn == ROOT_CAUSE_STATUS:
            assignment.values = ["CONFIRMED"]
    estate.catalog.emit([MetadataChangeProposalWrapper(entityUrn=LESSON, aspect=current)])
    change = estate.feed.only_change()
    assert change.actor == DEFAULT_ACTOR
    return change


@pytest.mark.parametrize(
    ("confirm", "reason"),
    [
        (_by(MARIA), f"{MARIA} is not an approver"),
        (_by(SERVICE_ACTOR), "Reflex's own writes never pass a human gate"),
        (_by(None), "the change names no actor"),
        (_without_actor_metadata, f"{DEFAULT_ACTOR} is not an approver"),
    ],
    ids=["unauthorized-user", "service-actor", "no-actor", "default-actor"],
)
def test_an_unauthorized_confirmation_is_reverted_and_shown(
    drafted: Estate, confirm: Confirmation, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Refused and logged; even the service actor listed as an approver is refused. Reflex puts
    the status back to its own PROPOSED and writes the refusal on the page; the same event
    delivered again changes nothing."""
    ctx = drafted.context(approvers={"users": [ALICE, SERVICE_ACTOR], "groups": [FINANCE_STEWARDS]})
    change = confirm(drafted)
    caplog.set_level(logging.WARNING, logger=GATES_LOGGER)

    decide_and_apply(on_lesson_properties, change, ctx)

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PROPOSED
    assert drafted.prop(ROOT_CAUSE_STATUS) == ["PROPOSED"]
    assert lesson.decisions[-1].decision == "confirmation refused"
    assert reason in lesson.decisions[-1].detail
    info = drafted.catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert info is not None and "confirmation refused" in info.definition
    refusals = [r.getMessage() for r in caplog.records if r.name == GATES_LOGGER]
    assert len(refusals) == 1 and reason in refusals[0]

    after_once = drafted.rows()
    decide_and_apply(on_lesson_properties, change, ctx)
    assert drafted.rows() == after_once


def test_an_owner_of_the_lesson_term_is_authorized(drafted: Estate) -> None:
    """maria is no approver, but owns the lesson's glossary term."""
    drafted.catalog.emit(
        [acting_as(ALICE, LESSON, OwnershipClass(owners=[OwnerClass(MARIA, "TECHNICAL_OWNER")]))]
    )
    ctx = drafted.context(histories=False)

    decide_and_apply(
        on_lesson_properties, drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, MARIA), ctx
    )

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.decisions[-1].actor == MARIA


def test_a_member_of_an_approver_group_is_authorized(drafted: Estate) -> None:
    """zoe is no listed approver, but a member of a configured approver group."""
    drafted.catalog.emit([acting_as(ALICE, ZOE, GroupMembershipClass(groups=[FINANCE_STEWARDS]))])
    ctx = drafted.context(histories=False, approvers={"groups": [FINANCE_STEWARDS]})

    decide_and_apply(
        on_lesson_properties, drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED"}, ZOE), ctx
    )

    lesson = drafted.lesson()
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.decisions[-1].actor == ZOE


def test_an_approval_typed_with_the_confirmation_publishes_nothing(drafted: Estate) -> None:
    """Approval decides on the backtest report, so it must follow PENDING; one edit setting
    CONFIRMED and APPROVED together backtests but does not publish."""
    ctx = drafted.context(histories=False)
    both = drafted.steward_sets({ROOT_CAUSE_STATUS: "CONFIRMED", APPROVAL: "APPROVED"}, ALICE)
    decide_and_apply(on_lesson_properties, both, ctx)
    lesson = drafted.lesson()
    assert lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.published_scope == []
    assert not [row for row in drafted.rows() if str(row[1]).startswith("urn:li:assertion:")]

    assert lesson.decisions[-1].decision == "approval refused"
    assert drafted.prop(APPROVAL) == ["PENDING"]

    # approving the written report, once Reflex's PENDING is in the log, publishes
    drafted.settle(ctx)
    decide_and_apply(on_lesson_properties, drafted.steward_sets({APPROVAL: "APPROVED"}, ALICE), ctx)
    assert drafted.lesson().state is LessonState.PUBLISHED
