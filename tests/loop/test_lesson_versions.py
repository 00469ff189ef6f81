"""A published lesson's later life on the embedded loop, through the real pipeline: a steward's
edit drafts a new version that publishes only once approved; a refused version leaves the old one
running; retirement stops runs and incidents; a rollback republishes an earlier version exactly.
"""

from __future__ import annotations

from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from datahub.metadata.schema_classes import AssertionInfoClass, GlossaryTermInfoClass, StatusClass

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.demo.run import INTRUDER, STEWARD, Demo
from reflex_actions.handlers.assertions import CONTROL_PROPERTY, assertion_urn
from reflex_actions.handlers.lesson_store import MAX_SCOPE_BYTES
from reflex_actions.lessons.model import LessonState, stored_scope_bytes
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    COVERAGE,
    LIFECYCLE,
    SCOPE,
    SCOPE_RULE,
    VERSION,
    display_name,
)
from tests.conftest import write_snapshot
from tests.loop.store import (
    all_rows,
    incidents_b,
    land,
    latest,
    property_values,
    replay_from_start,
    store_of,
    stored_lesson,
)
from tests.loop.test_landing import DUPLICATED, LEDGER, _landing
from tests.stages import PAYMENTS_LESSON

LOOSER = "{type: uniqueness, field: transaction_id, max_duplicate_count: 5}"


def _page(store: Path) -> str:
    info = latest(store, PAYMENTS_LESSON, GlossaryTermInfoClass)
    assert info is not None and info.definition
    return info.definition


def _removed(demo: Demo, dataset: str) -> bool:
    status = latest(store_of(demo.workdir), assertion_urn(PAYMENTS_LESSON, dataset), StatusClass)
    return status is not None and bool(status.removed)


def _running_control(demo: Demo, dataset: str) -> str:
    info = latest(
        store_of(demo.workdir), assertion_urn(PAYMENTS_LESSON, dataset), AssertionInfoClass
    )
    assert info is not None
    return (info.customProperties or {})[CONTROL_PROPERTY]


def _covered(demo: Demo, dataset: str) -> bool:
    values = property_values(store_of(demo.workdir), dataset, COVERAGE)
    return PAYMENTS_LESSON in [str(v) for v in values]


def _land_duplicates(demo: Demo, snapshot_id: str) -> None:
    snapshot = write_snapshot(_landing(demo) / f"{snapshot_id}.parquet", DUPLICATED)
    land(demo, LEDGER, snapshot, snapshot_id)
    demo.react()


def test_a_narrowed_scope_publishes_only_after_approval_and_removes_the_dropped_assertion(
    published: Demo,
) -> None:
    store = store_of(published.workdir)
    first = stored_lesson(store, PAYMENTS_LESSON)
    assert LEDGER in first.published_scope and first.approved is not None
    narrowed = [urn for urn in first.published_scope if urn != LEDGER]

    published.catalog.set_structured_properties(PAYMENTS_LESSON, {SCOPE: narrowed}, STEWARD)
    published.react()

    drafted = stored_lesson(store, PAYMENTS_LESSON)
    assert drafted.state is LessonState.PENDING_APPROVAL and drafted.revision is not None
    assert property_values(store, PAYMENTS_LESSON, APPROVAL) == ["PENDING"]
    assert drafted.published_scope == first.published_scope  # version 1 still runs everywhere
    assert not _removed(published, LEDGER) and _covered(published, LEDGER)
    assert drafted.backtest is not None  # re-backtested
    assert "Version 2 waits for approval" in _page(store)

    _land_duplicates(published, "before-approval")  # still caught by version 1
    assert incidents_b(store, LEDGER)

    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED
    assert lesson.published_scope == narrowed
    assert [v.number for v in lesson.versions] == [1, 2]
    assert lesson.versions[0].scope == first.approved.scope  # the history keeps version 1 whole
    assert lesson.approved is not None and lesson.approved.scope == narrowed
    assert lesson.approved.actor == STEWARD and lesson.approved.backtest is not None
    assert _removed(published, LEDGER) and not _covered(published, LEDGER)
    assert all(not _removed(published, urn) and _covered(published, urn) for urn in narrowed)
    assert property_values(store, PAYMENTS_LESSON, VERSION) == [2]
    page = _page(store)
    assert "#### Versions" in page and "| 2 (in force) |" in page

    raised = set(incidents_b(store, LEDGER))
    _land_duplicates(published, "after-approval")
    assert set(incidents_b(store, LEDGER)) == raised  # the dropped dataset is not checked any more


def test_a_rejected_version_leaves_the_old_one_running(published: Demo) -> None:
    store = store_of(published.workdir)
    running = _running_control(published, LEDGER)

    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER)
    drafted = stored_lesson(store, PAYMENTS_LESSON)
    assert drafted.state is LessonState.PENDING_APPROVAL
    assert drafted.control == {
        "type": "uniqueness",
        "field": "transaction_id",
        "max_duplicate_count": 5,
    }

    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "REJECTED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.revision is None
    assert lesson.control == {"type": "uniqueness", "field": "transaction_id"}
    assert [v.number for v in lesson.versions] == [1]
    assert _running_control(published, LEDGER) == running
    assert property_values(store, PAYMENTS_LESSON, APPROVAL) == ["APPROVED"]
    assert "max_duplicate_count" not in str(property_values(store, PAYMENTS_LESSON, CONTROL_SPEC))
    assert lesson.decisions[-1].decision == "version 2 rejected"

    _land_duplicates(published, "after-rejection")  # version 1's strict control still catches it
    assert incidents_b(store, LEDGER)


def test_an_edit_by_someone_not_authorized_is_put_back_and_drafts_nothing(
    published: Demo,
) -> None:
    store = store_of(published.workdir)
    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER, actor=INTRUDER)

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.revision is None
    assert lesson.decisions[-1].decision == "new version refused"
    assert "max_duplicate_count" not in str(property_values(store, PAYMENTS_LESSON, CONTROL_SPEC))


def test_an_invalid_edit_is_refused_with_its_error_on_the_page(published: Demo) -> None:
    store = store_of(published.workdir)
    published.steward_sets(
        PAYMENTS_LESSON, CONTROL_SPEC, "{type: uniqueness, field: no_such_column}"
    )

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.revision is None
    assert lesson.decisions[-1].decision == "new version refused"
    assert "no_such_column" in lesson.decisions[-1].detail
    assert "no_such_column" in _page(store)


def test_retirement_stops_runs_and_incidents_and_keeps_the_record(published: Demo) -> None:
    store = store_of(published.workdir)
    _land_duplicates(published, "before-retirement")
    raised = set(incidents_b(store, LEDGER))
    assert raised

    published.steward_sets(PAYMENTS_LESSON, LIFECYCLE, "RETIRED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.RETIRED and lesson.published_scope == []
    assert lesson.recurrences  # the record stays
    assert all(_removed(published, urn) for urn in lesson.versions[0].scope)
    assert not any(_covered(published, urn) for urn in lesson.versions[0].scope)
    assert "**Retired:**" in _page(store)

    _land_duplicates(published, "after-retirement")
    assert set(incidents_b(store, LEDGER)) == raised


def test_a_rollback_republishes_the_earlier_version_exactly(published: Demo) -> None:
    store = store_of(published.workdir)
    first = stored_lesson(store, PAYMENTS_LESSON).approved
    assert first is not None
    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER)
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")
    loosened = stored_lesson(store, PAYMENTS_LESSON)
    assert loosened.approved is not None and loosened.approved.number == 2
    assert "max_duplicate_count: 5" in _running_control(published, LEDGER)

    published.catalog.set_structured_properties(PAYMENTS_LESSON, {VERSION: [1]}, STEWARD)
    published.react()

    drafted = stored_lesson(store, PAYMENTS_LESSON)
    assert drafted.state is LessonState.PENDING_APPROVAL and drafted.revision is not None
    assert drafted.revision.rollback_of == 1 and drafted.control == first.control
    assert "max_duplicate_count: 5" in _running_control(published, LEDGER)  # 2 runs until approved
    assert drafted.backtest is not None  # the backtest is run again on today's estate

    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.approved is not None
    assert (lesson.approved.number, lesson.approved.rollback_of) == (3, 1)
    assert lesson.approved.control == first.control
    assert sorted(lesson.approved.scope) == sorted(first.scope)
    assert lesson.approved.digest == first.digest
    assert "max_duplicate_count" not in _running_control(published, LEDGER)
    assert property_values(store, PAYMENTS_LESSON, VERSION) == [3]


def test_a_rollback_after_retirement_brings_the_lesson_back_through_approval(
    published: Demo,
) -> None:
    store = store_of(published.workdir)
    first = stored_lesson(store, PAYMENTS_LESSON).approved
    assert first is not None
    published.steward_sets(PAYMENTS_LESSON, LIFECYCLE, "RETIRED")
    published.catalog.set_structured_properties(PAYMENTS_LESSON, {VERSION: [1]}, STEWARD)
    published.react()
    assert stored_lesson(store, PAYMENTS_LESSON).state is LessonState.PENDING_APPROVAL
    assert _removed(published, LEDGER)  # nothing runs before the approval

    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED
    assert sorted(lesson.published_scope) == sorted(first.scope)
    assert not _removed(published, LEDGER) and _covered(published, LEDGER)
    assert property_values(store, PAYMENTS_LESSON, LIFECYCLE) == ["ACTIVE"]
    raised = set(incidents_b(store, LEDGER))
    _land_duplicates(published, "after-comeback")
    assert set(incidents_b(store, LEDGER)) > raised


def test_a_rollback_to_a_version_that_never_was_is_refused(published: Demo) -> None:
    store = store_of(published.workdir)
    published.catalog.set_structured_properties(PAYMENTS_LESSON, {VERSION: [7]}, STEWARD)
    published.react()

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.revision is None
    assert lesson.decisions[-1].decision == "rollback refused"
    assert "choose 1 to 1" in lesson.decisions[-1].detail
    assert property_values(store, PAYMENTS_LESSON, VERSION) == [1]


def test_replaying_the_log_after_versions_and_retirement_changes_nothing(
    published: Demo,
) -> None:
    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER)
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")
    published.catalog.set_structured_properties(PAYMENTS_LESSON, {VERSION: [1]}, STEWARD)
    published.react()
    published.steward_sets(PAYMENTS_LESSON, LIFECYCLE, "RETIRED")
    store = store_of(published.workdir)
    before = all_rows(store)

    replay_from_start(published)

    assert all_rows(store) == before


def test_a_scope_past_the_bound_is_refused_and_put_back(published: Demo) -> None:
    store = store_of(published.workdir)
    first = stored_lesson(store, PAYMENTS_LESSON)
    # names that share little but their prefix: packed, they still take over the bound
    huge = [
        f"urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.t_{sha256(str(i).encode()).hexdigest()[:32]},PROD)"
        for i in range(6000)
    ]

    published.catalog.set_structured_properties(PAYMENTS_LESSON, {SCOPE: huge}, STEWARD)
    published.react()

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.revision is None
    assert (
        f"names {len(huge):,} datasets in {stored_scope_bytes(huge):,} bytes as stored; a lesson's "
        "record holds a listed scope "
        f"of at most {MAX_SCOPE_BYTES:,} bytes"
    ) in lesson.decisions[-1].detail
    assert first.approved is not None
    assert sorted(map(str, property_values(store, PAYMENTS_LESSON, SCOPE))) == sorted(
        first.approved.scope
    )


def test_a_crash_before_the_drafts_pending_is_finished_on_redelivery(
    published: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The draft is saved, then the store fails on Reflex's PENDING: the redelivered edit
    drafts again and opens the approval, instead of leaving a draft nobody can approve."""
    store = store_of(published.workdir)
    write = LiteCatalog.set_structured_properties
    failures: list[str] = []

    def flaky(self: LiteCatalog, urn: str, values: Any, actor: str) -> None:
        if not failures and values.get(APPROVAL) == ["PENDING"]:
            failures.append(urn)
            raise CatalogError("the store went away for a moment")
        write(self, urn, values, actor)

    monkeypatch.setattr(LiteCatalog, "set_structured_properties", flaky)
    published.config["options"]["retry_count"] = 1  # the pipeline redelivers a failed event
    published.steward_sets(PAYMENTS_LESSON, CONTROL_SPEC, LOOSER)

    assert failures, "Reflex's PENDING was never attempted"
    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PENDING_APPROVAL and lesson.approval_open
    assert property_values(store, PAYMENTS_LESSON, APPROVAL) == ["PENDING"]
    assert [d.decision for d in lesson.decisions].count("version 2 drafted") == 1

    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")
    assert "max_duplicate_count: 5" in _running_control(published, LEDGER)


def test_an_edit_recorded_as_datahubs_system_actor_is_refused_on_the_page(
    published: Demo,
) -> None:
    """With metadata-service auth off a steward's edit is recorded as __datahub_system, which
    is Reflex's own actor: it decides nothing, and the page says why."""
    store = store_of(published.workdir)
    published.steward_sets(
        PAYMENTS_LESSON, CONTROL_SPEC, LOOSER, actor="urn:li:corpuser:__datahub_system"
    )

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.revision is None
    assert lesson.decisions[-1].decision == "new version refused"
    assert "Reflex's own writes" in lesson.decisions[-1].detail
    assert "max_duplicate_count" not in str(property_values(store, PAYMENTS_LESSON, CONTROL_SPEC))


def test_an_approval_of_a_retired_lesson_is_refused_naming_the_way_back(published: Demo) -> None:
    store = store_of(published.workdir)
    published.steward_sets(PAYMENTS_LESSON, LIFECYCLE, "RETIRED")
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "REJECTED")
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.RETIRED and lesson.published_scope == []
    assert lesson.decisions[-1].decision == "approval refused"
    assert "set reflex.version" in lesson.decisions[-1].detail
    assert _removed(published, LEDGER)


def test_a_scope_edited_to_a_rule_covers_every_matching_dataset_and_withdraws_the_rest(
    published: Demo,
) -> None:
    store = store_of(published.workdir)
    first = stored_lesson(store, PAYMENTS_LESSON)
    rule = "{field: transaction_id}"

    published.catalog.set_structured_properties(
        PAYMENTS_LESSON, {SCOPE: [], SCOPE_RULE: [rule]}, STEWARD
    )
    published.react()
    drafted = stored_lesson(store, PAYMENTS_LESSON)
    assert drafted.state is LessonState.PENDING_APPROVAL and drafted.revision is not None
    assert property_values(store, PAYMENTS_LESSON, SCOPE_RULE) == ['{"field": "transaction_id"}']
    published.steward_sets(PAYMENTS_LESSON, APPROVAL, "APPROVED")

    lesson = stored_lesson(store, PAYMENTS_LESSON)
    assert lesson.state is LessonState.PUBLISHED and lesson.rollout is None
    assert lesson.approved is not None and lesson.approved.scope_rule is not None
    matching = LiteCatalog(store, access="read").datasets_by_field("transaction_id")
    assert len(matching) > len(first.published_scope) / 2
    missing = [u for u in matching if not _covered(published, u) or _removed(published, u)]
    assert lesson.publish_skipped == [  # the one the control does not fit, and why
        f"{display_name(urn)}.transaction_id has an incompatible type" for urn in missing
    ]
    assert len(missing) == 1
    dropped = [urn for urn in first.published_scope if urn not in matching]
    assert dropped  # the first version's datasets keyed by another name
    assert all(_removed(published, urn) and not _covered(published, urn) for urn in dropped)
    assert lesson.published_count == len(matching) - len(missing)
    assert "every dataset matching" in _page(store)
