"""Root cause confirmed -> control compiled, similar assets found, backtested, scope proposed."""

from __future__ import annotations

import logging

from reflex_actions import markdown
from reflex_actions.backtest import backtest
from reflex_actions.backtest.history import History
from reflex_actions.backtest.metrics import BacktestReport, Scores
from reflex_actions.backtest.report import render_markdown
from reflex_actions.controls import Control, parse_control_spec
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.lesson_store import save_lesson
from reflex_actions.kinds import kind_for_pattern
from reflex_actions.lessons.lifecycle import move
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.similarity import Resolution, SimilarityQuery, resolve_similar_assets
from reflex_actions.sql import Relation
from reflex_actions.vocabulary import APPROVAL, SCOPE, display_name

logger = logging.getLogger(__name__)

#: How the compiled SQL is shown: the snapshot file is bound at run time.
SHOWN_RELATION = Relation(sql="SELECT * FROM read_parquet($snapshot)")


def propose(lesson: Lesson, ctx: HandlerContext) -> None:
    """Write the proposal report and pre-fill the scope; the lesson then waits for approval."""
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
    scope = [lesson.source_dataset, *(c.urn for c in resolution.recommended)]
    backtest_section = _backtest_section(lesson, control, resolution, mappings, ctx)
    lesson.report = "\n".join(
        [
            "#### Compiled control (DuckDB SQL)",
            markdown.code_block(control.compile(SHOWN_RELATION).sql, "sql"),
            "",
            _candidates_section(resolution),
            "",
            backtest_section,
        ]
    )
    lesson.field_mappings = mappings
    move(lesson, LessonState.PENDING_APPROVAL)
    lesson.gate_values[APPROVAL] = "PENDING"
    lesson.approval_open = False  # until Reflex's PENDING below reaches the event log
    actor = ctx.config.service_actor
    save_lesson(ctx.catalog, lesson, actor)
    ctx.catalog.set_structured_properties(
        lesson.urn, {APPROVAL: ["PENDING"], SCOPE: list(dict.fromkeys(scope))}, actor
    )
    logger.info(
        "lesson %s: %d recommended of %d candidates; approval PENDING",
        lesson.urn,
        len(resolution.recommended),
        len(resolution.candidates),
    )


def _candidates_section(resolution: Resolution) -> str:
    lines = [
        f"#### Similar assets (recommended at score ≥ {resolution.threshold})",
        "",
        "| dataset | score | recommended | why |",
        "| --- | --- | --- | --- |",
    ]
    for c in resolution.candidates:
        name, why = markdown.escape(c.name), markdown.escape(c.explanation)
        lines.append(f"| {name} | {c.score:.2f} | {'yes' if c.recommended else 'no'} | {why} |")
    if resolution.excluded:
        lines += ["", "Ruled out:"]
        lines += [
            f"- {markdown.escape(e.name)}: {markdown.escape(e.reason)}" for e in resolution.excluded
        ]
    return "\n".join(lines)


def _backtest_section(
    lesson: Lesson,
    control: Control,
    resolution: Resolution,
    mappings: dict[str, dict[str, str]],
    ctx: HandlerContext,
) -> str:
    """Backtest on the source and every scored candidate that has a history, or, for a kind
    whose backtest runs on one estate-wide history (ownership snapshots), on that."""
    histories: dict[str, History] = {}  # dataset urn (or "" for the estate-wide one) -> history
    controls: dict[str, Control] = {}
    without_history: list[str] = []
    kind = kind_for_pattern(lesson.failure_pattern)
    if kind.estate_history is None:
        for urn in [lesson.source_dataset or "", *(c.urn for c in resolution.candidates)]:
            history = ctx.history_for(urn)
            if history is None:
                without_history.append(urn)
                continue
            histories[urn] = history
            if urn in mappings:
                controls[history.dataset] = control.with_dataset_fields(mappings[urn])
    elif (estate := ctx.estate_history(kind.estate_history)) is not None:
        histories[""] = estate  # one estate-wide history: it speaks for every scope
    if not histories:
        return "#### Backtest\n\nNo candidate has a snapshot history to backtest on."
    report = backtest(
        control,
        list(histories.values()),
        sample_size=ctx.config.backtest.sample_size,
        memory_limit=ctx.config.backtest.memory_limit,
        controls_by_dataset=controls,
    )
    scope = [lesson.source_dataset or "", *(c.urn for c in resolution.recommended)]
    scoped = {histories[urn].dataset for urn in ["", *scope] if urn in histories}
    missing = [display_name(urn) for urn in scope if urn in without_history]
    note = f"\n\nNo history for: {markdown.escape(', '.join(missing))}." if missing else ""
    return _scope_summary(report, scoped, len(set(scope))) + render_markdown(report) + note


def _scope_summary(report: BacktestReport, scoped: set[str], scope_size: int) -> str:
    """The figures for what approval would publish (the source and the recommended
    candidates), from the same per-dataset rows the tables below show (which also cover the
    near misses, for comparison); ``scoped`` names those rows' histories."""
    outcomes = [o for o in report.per_snapshot if o.dataset in scoped]
    datasets = [d for d in report.datasets if d.dataset in scoped]
    scores = Scores.compute(outcomes, len(datasets), sum(d.applicable for d in datasets))
    precision = "n/a" if scores["precision"] is None else f"{scores['precision']:.0%}"
    recall = "n/a" if scores["recall"] is None else f"{scores['recall']:.0%}"
    return (
        f"**Recommended scope** ({scope_size} datasets): precision {precision}, recall {recall}, "
        f"{scores['true_positives']} labelled failures caught, {scores['false_positives']} false "
        f"alarms, {scores['false_negatives']} missed, {scores['not_evaluable']} snapshots not "
        "evaluable.\n\n"
    )
