"""A scope as a rule (``reflex.scopeRule``): published on every dataset it matches when the
approval is handled, in slices, and believed only where Reflex's own assertion says so."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    AssertionRunEventClass,
    GlossaryTermInfoClass,
    NumberTypeClass,
    StatusClass,
)

from reflex_actions.catalog.steward import acting_as
from reflex_actions.cli.lessons import _summary
from reflex_actions.controls import parse_control_spec
from reflex_actions.handlers.assertions import assertion_mcp, assertion_urn
from reflex_actions.handlers.context import HandlerContext, decide_and_apply
from reflex_actions.handlers.gates import on_lesson_properties
from reflex_actions.handlers.lesson_store import (
    MAX_TERM_BYTES,
    load_lesson,
    structured_values,
    term_bytes,
)
from reflex_actions.handlers.rollout import IN_DECISION, SLICE_DATASETS, continue_rollouts
from reflex_actions.handlers.scheduled import on_schedule
from reflex_actions.lessons.model import ApprovedVersion, LessonState
from reflex_actions.lessons.scope import ScopeRule
from reflex_actions.vocabulary import (
    APPROVAL,
    CONTROL_SPEC,
    COVERAGE,
    LIFECYCLE,
    ROOT_CAUSE_STATUS,
    SCOPE,
    SCOPE_RULE,
)
from tests.catalog.builders import field, schema
from tests.catalog.memory_catalog import MemoryCatalog
from tests.handlers.builders import (
    CONTROL,
    INTRUDER,
    LESSON,
    PAYMENTS,
    SPEC,
    STEWARD,
    add_dataset,
    context,
    pending_lesson,
    property_change,
    seed,
)

RULE = "{platform: snowflake}"
#: more than the approval's decision and two slices publish
MATCHING = IN_DECISION + 2 * SLICE_DATASETS + 37


def _snowflake(n: int) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.table_{n:05d},PROD)"


POSTGRES = "urn:li:dataset:(urn:li:dataPlatform:postgres,finance.payments,PROD)"
#: matches the rule, but has no ``transaction_id``: the control does not fit it
NO_KEY = "urn:li:dataset:(urn:li:dataPlatform:snowflake,finance.daily_totals,PROD)"


def _estate(catalog: MemoryCatalog) -> list[str]:
    """PAYMENTS and MATCHING more Snowflake tables with a ``transaction_id``, one without it,
    one PostgreSQL table with it: the datasets the rule should go on."""
    matching = [PAYMENTS, *(_snowflake(n) for n in range(MATCHING))]
    for urn in [*matching, POSTGRES]:
        add_dataset(catalog, urn)
    seed(catalog, acting_as(STEWARD, NO_KEY, schema(field("total", "INT", NumberTypeClass()))))
    return matching


def _approval(rule: str = RULE, scope: tuple[str, ...] = (PAYMENTS,), actor: str = STEWARD):
    before = {
        ROOT_CAUSE_STATUS: ["CONFIRMED"],
        APPROVAL: ["PENDING"],
        SCOPE: list(scope),
        CONTROL_SPEC: [SPEC],
        SCOPE_RULE: [rule],
    }
    return property_change(LESSON, before, {APPROVAL: ["APPROVED"]}, actor=actor)


def _rolled_out() -> tuple[MemoryCatalog, HandlerContext, list[str]]:
    """The estate with the lesson approved on RULE and rolled out to its end."""
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    pending_lesson(catalog)
    ctx = context(catalog)
    decide_and_apply(on_lesson_properties, _approval(), ctx)
    continue_rollouts(ctx)
    return catalog, ctx, matching


def _covered(catalog: MemoryCatalog, urns: list[str]) -> list[str]:
    return [urn for urn in urns if LESSON in structured_values(catalog, urn, COVERAGE)]


def test_a_rule_is_published_on_every_dataset_it_matches_in_slices_and_the_record_stays_small() -> (
    None
):
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    pending_lesson(catalog)
    ctx = context(catalog)

    decide_and_apply(on_lesson_properties, _approval(), ctx)

    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None and lesson.state is LessonState.PUBLISHED
    assert lesson.rollout is not None and lesson.rollout.published == IN_DECISION - 1
    assert len(_covered(catalog, matching)) == IN_DECISION - 1  # and NO_KEY, in urn order
    assert "every dataset matching" in lesson.decisions[-1].detail

    assert continue_rollouts(ctx) == 3

    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None and lesson.rollout is None
    assert _covered(catalog, matching) == matching
    assert _covered(catalog, [POSTGRES, NO_KEY]) == []
    assert lesson.published_count == len(matching) and lesson.published_scope == []
    assert lesson.publish_skipped == ["finance.daily_totals has no field transaction_id"]
    approved = lesson.approved
    assert approved is not None and approved.scope_rule == ScopeRule(platform="snowflake")
    assert approved.digest == ApprovedVersion.digest_of(CONTROL, [PAYMENTS], approved.scope_rule)
    assert approved.digest != ApprovedVersion.digest_of(CONTROL, [PAYMENTS])
    term = catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert term is not None and term_bytes(term) < 32 * 1024 <= MAX_TERM_BYTES
    assert '{"platform": "snowflake"}' in term.definition
    assert f"{len(matching):,} datasets" in term.definition


def test_a_rule_runs_where_reflex_published_it_not_where_a_forged_write_says() -> None:
    catalog, ctx, matching = _rolled_out()

    assert [x.urn for x in ctx.published_lessons(matching[-1])] == [LESSON]
    # someone else covers the PostgreSQL table with the lesson and writes its assertion there
    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None
    seed(catalog, assertion_mcp(lesson, POSTGRES, parse_control_spec(CONTROL), INTRUDER))
    catalog.set_structured_properties(POSTGRES, {COVERAGE: [LESSON]}, INTRUDER)
    assert ctx.published_lessons(POSTGRES) == []
    # and a dataset Reflex withdrew the lesson from is not run either, whatever its coverage
    seed(catalog, acting_as(INTRUDER, assertion_urn(LESSON, matching[0]), StatusClass(True)))
    assert ctx.published_lessons(matching[0]) == []


def test_a_redelivered_rule_approval_changes_nothing() -> None:
    catalog = MemoryCatalog()
    _estate(catalog)
    pending_lesson(catalog)
    ctx = context(catalog)
    change = _approval()
    decide_and_apply(on_lesson_properties, change, ctx)
    continue_rollouts(ctx)
    written = len(catalog.writes)

    decide_and_apply(on_lesson_properties, change, ctx)

    assert len(catalog.writes) == written


def test_a_rollout_interrupted_by_a_crash_resumes_and_publishes_each_dataset_once() -> None:
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    pending_lesson(catalog)
    decide_and_apply(on_lesson_properties, _approval(), context(catalog))

    turns = 0

    @contextmanager
    def crashing_turn() -> Iterator[None]:
        nonlocal turns
        turns += 1
        if turns == 3:  # the store's list of lessons, one slice, then the process dies
            raise SystemExit("killed")
        yield

    with pytest.raises(SystemExit):
        continue_rollouts(context(catalog), crashing_turn)
    assert continue_rollouts(context(catalog)) == 2  # a new process goes on where it stopped

    assert _covered(catalog, matching) == matching
    published = Counter(w.entityUrn for w in catalog.writes if w.aspectName == "assertionInfo")
    assert set(published.values()) == {1}


def test_retiring_a_rule_lesson_withdraws_it_everywhere_in_slices() -> None:
    catalog, ctx, matching = _rolled_out()

    retire = property_change(LESSON, {LIFECYCLE: ["ACTIVE"]}, {LIFECYCLE: ["RETIRED"]})
    decide_and_apply(on_lesson_properties, retire, ctx)
    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None and lesson.state is LessonState.RETIRED
    # the first IN_DECISION datasets in urn order; NO_KEY among them never had it
    assert lesson.rollout is not None and lesson.rollout.withdrawn == IN_DECISION - 1
    continue_rollouts(ctx)

    assert _covered(catalog, matching) == []
    removed = [catalog.get_aspect(assertion_urn(LESSON, urn), StatusClass) for urn in matching]
    assert all(status is not None and status.removed for status in removed)
    # never published on NO_KEY: nothing was written there
    assert catalog.get_aspect(assertion_urn(LESSON, NO_KEY), AssertionInfoClass) is None
    assert catalog.get_aspect(assertion_urn(LESSON, NO_KEY), StatusClass) is None


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("{owner: alice}", "reflex.scopeRule owner: Extra inputs are not permitted"),
        ("{}", "a scope rule names a platform, a domain or a field"),
        ("[postgres]", "reflex.scopeRule is a mapping of platform, domain and field"),
        ("{platform: [a, b]}", "reflex.scopeRule platform: Input should be a valid string"),
        ("{platform: &a x, field: *a}", "reflex.scopeRule"),
    ],
)
def test_a_rule_that_is_not_one_is_refused_naming_the_problem(rule: str, reason: str) -> None:
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    pending_lesson(catalog)
    ctx = context(catalog)

    decide_and_apply(on_lesson_properties, _approval(rule), ctx)

    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None and lesson.state is LessonState.PENDING_APPROVAL
    assert lesson.decisions[-1].decision == "approval refused"
    assert reason in lesson.decisions[-1].detail
    assert _covered(catalog, matching) == []


def test_the_sweep_judges_a_rule_where_it_was_published_not_a_dataset_added_since() -> None:
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    freshness = {"type": "freshness", "max_age": "26h"}
    pending_lesson(catalog, control=freshness)
    ctx = context(catalog)
    rule = "{platform: snowflake, field: transaction_id}"
    before = {
        ROOT_CAUSE_STATUS: ["CONFIRMED"],
        APPROVAL: ["PENDING"],
        SCOPE: [],
        CONTROL_SPEC: ["{type: freshness, max_age: 26h}"],
        SCOPE_RULE: [rule],
    }
    decide_and_apply(
        on_lesson_properties, property_change(LESSON, before, {APPROVAL: ["APPROVED"]}), ctx
    )
    continue_rollouts(ctx)
    # a table created after the approval, which someone else covers with a forged assertion
    later = _snowflake(MATCHING + 1)
    add_dataset(catalog, later)
    lesson = load_lesson(catalog, LESSON)
    assert lesson is not None and lesson.published_count == len(matching)
    seed(catalog, assertion_mcp(lesson, later, parse_control_spec(freshness), INTRUDER))
    catalog.set_structured_properties(later, {COVERAGE: [LESSON]}, INTRUDER)
    catalog.writes.clear()

    counts = on_schedule(ctx, now_ms=10**12 + 3_600_000, interval_seconds=3600)

    judged = Counter(
        w.entityUrn for w in catalog.writes if isinstance(w.aspect, AssertionRunEventClass)
    )
    assert set(judged) == {assertion_urn(LESSON, urn) for urn in matching}
    assert set(judged.values()) == {1} and counts.judged == len(matching)


def test_a_rollout_is_carried_on_by_the_instance_owning_the_lesson_only() -> None:
    """Several instances in one consumer group: the one whose change-log partition holds the
    lesson's term (it handled the approval) rolls it out; the others leave it alone."""
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    pending_lesson(catalog)
    decide_and_apply(on_lesson_properties, _approval(), context(catalog))
    written = len(catalog.writes)

    assert continue_rollouts(context(catalog), owns=lambda urn: urn != LESSON) == 0
    assert len(catalog.writes) == written

    assert continue_rollouts(context(catalog), owns=lambda urn: urn == LESSON) == 3
    assert _covered(catalog, matching) == matching


def test_the_lessons_listing_says_the_rule_and_how_far_the_rollout_got() -> None:
    catalog = MemoryCatalog()
    matching = _estate(catalog)
    pending_lesson(catalog)
    decide_and_apply(on_lesson_properties, _approval(), context(catalog))

    entry = _summary(catalog, LESSON)
    assert entry is not None and entry["scope_rule"] == '{"platform": "snowflake"}'
    assert entry["rollout"] == (
        f"publishing version 1 in slices: {IN_DECISION - 1} published, 1 skipped so far"
    )
    assert entry["scope_size"] == IN_DECISION - 1

    continue_rollouts(context(catalog))
    entry = _summary(catalog, LESSON)
    assert entry is not None and entry["rollout"] is None
    assert entry["scope_size"] == len(matching)
