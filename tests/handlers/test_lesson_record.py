"""A lesson's term stays within its bound whatever its history: it keeps the latest decisions,
recurrences, versions and backtest outcomes and counts the older ones, and what decides (the
log position judged, the version in force, a rollback's target) survives the trimming."""

from __future__ import annotations

import base64
import json
import logging
import zlib
from typing import Any

import pytest
from datahub.metadata.schema_classes import GlossaryTermInfoClass

from reflex_actions.catalog.base import CatalogError
from reflex_actions.handlers.approval_values import scope_refusal
from reflex_actions.handlers.assertions import RECURRENCE_TYPE, assertion_urn
from reflex_actions.handlers.context import decide_and_apply
from reflex_actions.handlers.directives import SaveLesson
from reflex_actions.handlers.gates import on_dataset_properties, on_lesson_properties
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.lesson_store import (
    LESSON_PROPERTY,
    MAX_TERM_BYTES,
    lesson_term_mcp,
    load_lesson,
    save_lesson,
    term_bytes,
)
from reflex_actions.lessons.model import (
    KEPT_DECISIONS,
    KEPT_OUTCOMES,
    KEPT_RECURRENCES,
    KEPT_VERSIONS,
    MAX_KEPT_TEXT,
    EventStamp,
    Lesson,
    LessonState,
    LogPosition,
    Recurrence,
    RecurrenceResolution,
    Revision,
)
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, SCOPE, VERSION
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    CONTROL,
    INTRUDER,
    LESSON,
    PAYMENTS,
    REFLEX,
    SPEC,
    STEWARD,
    approval,
    approved_version,
    context,
    property_change,
    published_lesson,
    published_versions,
    store_lesson,
    timelines,
)
from tests.handlers.test_incident_resolved import resolution
from tests.handlers.test_ownership import ownership_decision, proposal_pending


def _term(catalog: MemoryCatalog) -> GlossaryTermInfoClass:
    term = catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert term is not None and term.definition
    return term


def _reloaded(catalog: MemoryCatalog) -> Lesson:
    stored = load_lesson(catalog, LESSON)
    assert stored is not None
    return stored


def _recurrence(n: int) -> Recurrence:
    return Recurrence(
        incident=f"urn:li:incident:reflex-{n:05d}", dataset=PAYMENTS, snapshot=f"s{n}", at=n
    )


def test_ten_thousand_recurrences_and_a_thousand_decisions_keep_the_term_bounded() -> None:
    catalog = MemoryCatalog()
    ctx = context(catalog)
    backtested = timelines("a", "b", "c", snapshots=400)
    store_lesson(catalog, published_versions(1, backtest=backtested))
    refused = approval(INTRUDER)
    decide_and_apply(on_lesson_properties, refused, ctx)  # the first decision, by the handler
    assert _reloaded(catalog).decisions[-1].decision == "approval refused"
    assert refused.position is not None
    largest = 0
    for day in range(100):  # a recurrence caught every day, for years, and decisions on them
        lesson = _reloaded(catalog)
        for n in range(day * 100, (day + 1) * 100):
            assert lesson.note_recurrence(_recurrence(n))
        for n in range(day * 10, (day + 1) * 10):
            position = LogPosition(stream="test", offset=refused.position.offset + 1 + n)
            stamp = EventStamp(actor=INTRUDER, at=100 + n, position=position)
            assert lesson.record_decision("approval refused", stamp, f"refusal {n}")
            lesson.judged = position
        save_lesson(catalog, lesson, REFLEX)
        largest = max(largest, term_bytes(_term(catalog)))

    assert largest <= MAX_TERM_BYTES
    stored = _reloaded(catalog)
    assert (stored.recurrence_count, stored.decision_count) == (10_000, 1_001)
    kept = [r.incident for r in stored.recurrences]
    assert kept == [_recurrence(n).incident for n in range(10_000 - KEPT_RECURRENCES, 10_000)]
    assert [d.detail for d in stored.decisions] == [
        f"refusal {n}" for n in range(1_000 - KEPT_DECISIONS, 1_000)
    ]
    newest = [o.snapshot_id for o in stored.backtest.outcomes_for("c")] if stored.backtest else []
    assert newest == [f"s{n:04d}" for n in range(400 - KEPT_OUTCOMES // 3, 400)]
    page = _term(catalog).definition or ""
    assert f"10,000 in all; the latest {KEPT_RECURRENCES} are below" in page
    assert f"type `{RECURRENCE_TYPE}`" in page and f"description names `{LESSON}`" in page
    assert f"1,001 in all; the latest {KEPT_DECISIONS} are below" in page
    assert "`urn:li:incident:reflex-09999`" in page and "reflex-09899" not in page
    assert "refusal 999" in page and "refusal 949" not in page

    catalog.writes.clear()
    decide_and_apply(on_lesson_properties, refused, ctx)  # its decision is no longer kept

    assert catalog.writes == []
    assert _reloaded(catalog).decision_count == 1_001


def test_a_redelivered_owner_decision_no_longer_kept_changes_nothing() -> None:
    """A dataset's event is not ordered against the lesson's own (``judged``): the place of
    the decisions no longer kept still tells its redelivery."""
    catalog, ctx, _ = proposal_pending()
    refused = ownership_decision(INTRUDER)
    decide_and_apply(on_dataset_properties, refused, ctx)
    for _ in range(KEPT_DECISIONS):  # later decisions on the lesson push that refusal out
        decide_and_apply(on_lesson_properties, approval(INTRUDER), ctx)
    stored = _reloaded(catalog)
    assert stored.decision_count > KEPT_DECISIONS == len(stored.decisions)
    assert all(d.position != refused.position for d in stored.decisions)
    catalog.writes.clear()

    decide_and_apply(on_dataset_properties, refused, ctx)

    assert catalog.writes == []
    assert _reloaded(catalog).decision_count == stored.decision_count


def test_the_term_stays_bounded_when_each_record_is_large() -> None:
    """Long refusal reasons and notes and wide scopes: the term keeps fewer of each, the latest
    decision always, its detail shortened."""
    catalog = MemoryCatalog()
    wide = [
        f"urn:li:dataset:(urn:li:dataPlatform:snowflake,db.s.table_{n},PROD)" for n in range(300)
    ]
    versions = [
        approved_version(n, scope=wide, published_scope=wide) for n in range(1, KEPT_VERSIONS + 6)
    ]
    stored = published_versions(
        0,
        versions=versions,
        approved=versions[-1],
        published_scope=wide,
        recurrences=[
            _recurrence(n).model_copy(
                update={"resolved": RecurrenceResolution(by=STEWARD, at=n, note="n" * 20_000)}
            )
            for n in range(2 * KEPT_RECURRENCES)
        ],
    )
    for n in range(2 * KEPT_DECISIONS):
        stamp = EventStamp(actor=INTRUDER, at=n, position=LogPosition(stream="test", offset=n))
        stored.record_decision(f"decision {n}", stamp, "|*" * 10_000)

    store_lesson(catalog, stored)

    assert term_bytes(_term(catalog)) <= MAX_TERM_BYTES
    reloaded = _reloaded(catalog)
    assert reloaded.decision_count == 2 * KEPT_DECISIONS
    assert reloaded.recurrence_count == 2 * KEPT_RECURRENCES
    assert reloaded.version_count == KEPT_VERSIONS + 5
    assert len(reloaded.versions) < KEPT_VERSIONS  # fewer kept, to fit
    latest = reloaded.decisions[-1]
    assert latest.decision == f"decision {2 * KEPT_DECISIONS - 1}"
    assert latest.position == LogPosition(stream="test", offset=2 * KEPT_DECISIONS - 1)
    assert len(latest.detail) == MAX_KEPT_TEXT
    resolved = reloaded.recurrences[-1].resolved
    assert resolved is not None and len(resolved.note) == MAX_KEPT_TEXT
    assert reloaded.approved is not None and reloaded.approved.scope == wide


def test_the_version_in_force_keeps_its_report_and_backtest_once_and_others_are_compact() -> None:
    catalog = MemoryCatalog()
    published = store_lesson(catalog, published_versions(KEPT_VERSIONS + 10))
    stored = _reloaded(catalog)

    assert [v.number for v in stored.versions] == list(range(11, KEPT_VERSIONS + 11))
    assert all(v.report == "" and v.field_mappings == {} for v in stored.versions)
    assert all(v.backtest and not v.backtest.outcomes for v in stored.versions)
    assert stored.versions[0].backtest == published.versions[10].compact().backtest  # figures
    assert stored.approved == published.approved  # report, mappings, backtest: all of it
    raw = (_term(catalog).customProperties or {})[LESSON_PROPERTY]
    assert raw.count(published.report) == 1  # the lesson's report is the version in force's
    page = _term(catalog).definition or ""
    assert f"{KEPT_VERSIONS + 10} in all; those below are kept" in page
    assert "\n| 11 | " in page and "\n| 10 | " not in page

    draft = timelines("finance.payments", "finance.ledger", snapshots=10)
    stored.revision = Revision(origin="edited", requested_by=STEWARD, at=50)
    stored.state, stored.report, stored.backtest = LessonState.PENDING_APPROVAL, "draft", draft
    stored.gate_values[APPROVAL] = "PENDING"
    store_lesson(catalog, stored)
    rejected = property_change(
        LESSON, {APPROVAL: ["PENDING"], CONTROL_SPEC: [SPEC]}, {APPROVAL: ["REJECTED"]}
    )
    decide_and_apply(on_lesson_properties, rejected, context(catalog))

    restored = _reloaded(catalog)
    assert restored.state is LessonState.PUBLISHED
    assert restored.backtest == published.backtest and restored.report == published.report


def test_a_rollback_to_a_version_no_longer_kept_is_refused_with_the_reason() -> None:
    catalog = MemoryCatalog()
    ctx = context(catalog)
    count = KEPT_VERSIONS + 10
    store_lesson(catalog, published_versions(count))
    shown: dict[str, list[Any]] = {
        VERSION: [count],
        SCOPE: [PAYMENTS],
        CONTROL_SPEC: [SPEC],
        APPROVAL: ["APPROVED"],
    }

    on_lesson_properties(property_change(LESSON, shown, {VERSION: [5]}), ctx)

    saves = [d.lesson for d in ctx.out.directives if isinstance(d, SaveLesson)]
    assert saves and saves[-1].revision is None  # nothing drafted
    refusal = saves[-1].decisions[-1]
    assert refusal.decision == "rollback refused"
    assert refusal.detail.startswith(
        f"version 5 is older than the versions this lesson keeps (11 to {count})"
    )


def test_a_waiting_rollback_keeps_the_version_it_returns_to() -> None:
    catalog = MemoryCatalog()
    rollback = Revision(origin="rollback to version 2", requested_by=STEWARD, at=9, rollback_of=2)
    store_lesson(
        catalog,
        published_versions(
            KEPT_VERSIONS + 10, state=LessonState.PENDING_APPROVAL, revision=rollback
        ),
    )

    stored = _reloaded(catalog)

    assert [v.number for v in stored.versions] == [2, *range(11, KEPT_VERSIONS + 11)]
    kept = stored.version(2)
    assert kept is not None and kept.scope == [PAYMENTS] and kept.control == CONTROL


def test_a_resolved_recurrence_older_than_those_kept_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    catalog = MemoryCatalog()
    recurrences = [_recurrence(n) for n in range(KEPT_RECURRENCES + 1)]
    published_lesson(catalog, approved_at=5, recurrences=recurrences)
    ctx = context(catalog)
    oldest = recurrences[0].incident
    raised_by = assertion_urn(LESSON, PAYMENTS)

    with caplog.at_level(logging.INFO):
        on_incident_change(resolution(oldest, custom_type=RECURRENCE_TYPE, source=raised_by), ctx)

    assert ctx.out.directives == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("keeps only its latest recurrences" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("datasets", [3000, 14000])
def test_a_scope_of_thousands_is_stored_once_packed_and_the_page_names_a_few(datasets: int) -> None:
    """The published scope is stored once (not again per version) and packed; the record of
    14,000 datasets stays within the term's bound, reloads whole, and the page names 50."""
    scope = [
        f"urn:li:dataset:(urn:li:dataPlatform:postgres,shop.public.table_{n:05d},PROD)"
        for n in range(datasets)
    ]
    earlier = approved_version(1, scope=scope[:10], published_scope=scope[:10])
    in_force = approved_version(2, scope=scope, published_scope=scope)
    catalog = MemoryCatalog()
    published = store_lesson(
        catalog,
        published_versions(0, versions=[earlier, in_force], approved=in_force,
                           published_scope=scope, report=in_force.report,
                           backtest=in_force.backtest, field_mappings=in_force.field_mappings),
    )  # fmt: skip

    term = _term(catalog)
    raw = (term.customProperties or {})[LESSON_PROPERTY]
    assert '"packed_scope":"' in raw and "table_00999" not in raw  # packed, once
    assert raw.count("table_00009") == 1  # the earlier version's own (small) scope
    assert term_bytes(term) <= MAX_TERM_BYTES
    assert scope_refusal(scope) is None
    stored = _reloaded(catalog)
    assert stored.published_scope == scope and stored.approved == published.approved
    assert [v.scope for v in stored.versions] == [scope[:10], scope]
    page = term.definition or ""
    assert f"{datasets:,} datasets in all; the first 50 are above" in page
    assert "table_00049" in page and "table_00050" not in page
    assert f"| {datasets:,} datasets: shop.public.table_00000, " in page


@pytest.mark.parametrize(
    ("packed", "problem"),
    [
        ("not base64!", "not a packed scope"),
        (base64.b64encode(zlib.compress(b'{"a": 1}')).decode(), "not a packed list of urns"),
        (
            base64.b64encode(zlib.compress(b"[" + b"0," * 9_000_000 + b"0]")).decode(),
            "unpacks to more",
        ),
    ],
)
def test_a_packed_scope_that_is_no_scope_is_a_malformed_record(packed: str, problem: str) -> None:
    catalog = MemoryCatalog()
    lesson = published_versions(0)
    info = lesson_term_mcp(lesson, "t", "urn:li:corpuser:x")
    record = json.loads((info.aspect.customProperties or {})[LESSON_PROPERTY])
    info.aspect.customProperties[LESSON_PROPERTY] = json.dumps({**record, "packed_scope": packed})
    catalog.emit([info])
    with pytest.raises(CatalogError, match="is malformed") as raised:
        load_lesson(catalog, lesson.urn)
    assert problem in str(raised.value)
