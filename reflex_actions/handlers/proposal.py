"""Root cause confirmed -> control compiled, similar assets found, backtested, scope proposed."""

from __future__ import annotations

import logging

from reflex_actions.backtest.history import History
from reflex_actions.backtest.merge import backtest_on_engines
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.engines.base import Engine
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import control_yaml
from reflex_actions.lessons import lifecycle
from reflex_actions.lessons.model import BacktestSummary, Lesson
from reflex_actions.lessons.scope import ScopeRule
from reflex_actions.registry import kind_for_pattern
from reflex_actions.report import markdown
from reflex_actions.report.backtest import render_markdown
from reflex_actions.report.lesson_page import learning_section, proposal_report, scope_summary
from reflex_actions.similarity import Resolution, SimilarityQuery, resolve_similar_assets
from reflex_actions.sql import shown_relation, shown_sql
from reflex_actions.vocabulary import APPROVAL, CONTROL_SPEC, SCOPE, SCOPE_RULE, display_name

logger = logging.getLogger(__name__)


def propose(
    lesson: Lesson,
    ctx: HandlerContext,
    scope: list[str] | None = None,
    rule: ScopeRule | None = None,
) -> None:
    """Write the proposal report and pre-fill the scope (the recommended datasets, or the
    ``scope`` and ``rule`` a new version names); the lesson then waits for approval. A rule's
    datasets are not backtested one by one: the backtest covers those it lists and the
    candidates."""
    if lesson.control is None:
        raise ReflexError("the lesson has no control to backtest")
    if lesson.source_dataset is None:
        named = [urn for urn in lesson.affected_assets if urn.startswith("urn:li:dataset:")]
        raise ReflexError(
            f"incident {lesson.incident} "
            + (f"names {named[0]}, which is not in the catalog" if named else "names no dataset")
            + ", so there is nothing to compare similar assets with"
        )
    control = parse_control_spec(lesson.control)
    resolution = resolve_similar_assets(
        SimilarityQuery(
            pattern=lesson.failure_pattern,
            control=control,
            source_urn=lesson.source_dataset,
            lesson_urn=lesson.urn,
            departed_users=tuple(lesson.departed_users),
        ),
        ctx.catalog,
        ctx.config.similarity,
    )
    mappings = {c.urn: c.field_mapping for c in resolution.candidates if c.field_mapping}
    if scope is None:
        scope = [lesson.source_dataset, *(c.urn for c in resolution.recommended)]
    scope = list(dict.fromkeys(scope))
    backtest_section, backtest = _backtest_section(
        lesson, control, resolution, mappings, scope, ctx
    )
    report = proposal_report(
        shown_sql(control.compile(shown_relation())), resolution, backtest_section
    )
    # approval opens once Reflex's PENDING below reaches the event log
    lifecycle.propose(lesson, backtest=backtest, report=report, field_mappings=mappings)
    ctx.out.save_lesson(lesson)
    values = {APPROVAL: ["PENDING"], SCOPE: scope}
    if lesson.revision is not None:  # what is approved is the draft: show it where it is edited
        values[CONTROL_SPEC] = [control_yaml(lesson)]
        values[SCOPE_RULE] = [rule.text()] if rule else []
    ctx.out.set_properties(lesson.urn, values)
    logger.info(
        "lesson %s: %d recommended of %d candidates; approval PENDING",
        lesson.urn,
        len(resolution.recommended),
        len(resolution.candidates),
    )


def _backtest_section(
    lesson: Lesson,
    control: Control,
    resolution: Resolution,
    mappings: dict[str, dict[str, str]],
    scope: list[str],
    ctx: HandlerContext,
) -> tuple[str, BacktestSummary | None]:
    """Backtest on the source, every scored candidate and every scoped dataset that has a
    history, or, for a kind whose backtest runs on one estate-wide history (ownership
    snapshots), on that: the report's section, and its summary (None with no history)."""
    histories: dict[str, History] = {}  # dataset urn (or "" for the estate-wide one) -> history
    read_on: dict[str, Engine | None] = {}  # dataset urn -> the engine reading its history
    controls: dict[str, Control] = {}
    without_history: list[str] = []
    kind = kind_for_pattern(lesson.failure_pattern)
    if kind.estate_history is None:
        backtested = [lesson.source_dataset or "", *(c.urn for c in resolution.candidates)]
        for urn in dict.fromkeys([*backtested, *scope]):
            found = ctx.histories.backtest_history(urn)
            if found is None:
                without_history.append(urn)
                continue
            history, read_on[urn] = found
            if urn == lesson.source_dataset and lesson.dated_failures:
                history = history.with_failures(lesson.dated_failures, lesson.incident)
            histories[urn] = history
            if urn in mappings:
                controls[history.dataset] = control.with_dataset_fields(mappings[urn])
    elif (estate := ctx.histories.estate_history(kind.estate_history)) is not None:
        histories[""] = estate  # one estate-wide history: it speaks for every scope
    if not histories:
        return "#### Backtest\n\nNo candidate has a snapshot history to backtest on.", None
    report = backtest_on_engines(
        control,
        [(history, read_on.get(urn)) for urn, history in histories.items()],
        sample_size=ctx.config.backtest.sample_size,
        memory_limit=ctx.config.backtest.memory_limit,
        controls_by_dataset=controls,
        references=ctx.histories.reference_histories(
            control, (read_on.get(urn) for urn in histories)
        ),
    )
    scoped = {histories[urn].dataset for urn in ["", *scope] if urn in histories}
    scope_scores = report.scores_on(scoped)
    missing = [display_name(urn) for urn in scope if urn in without_history]
    note = f"\n\nNo history for: {markdown.escape(', '.join(missing))}." if missing else ""
    if lesson.dated_failures and kind.estate_history is None:
        dated = markdown.escape(", ".join(lesson.dated_failures))
        note += (
            f"\n\nLabelled as the incident's failure by its dates (labels.yaml names none of "
            f"its snapshots): {dated}."
        )
    section = (
        scope_summary(scope_scores, len(scope))
        + learning_section(report, lesson.learned_from)
        + render_markdown(report)
        + note
    )
    return section, BacktestSummary.of(report, scope_scores)
