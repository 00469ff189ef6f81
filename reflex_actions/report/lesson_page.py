"""The lesson page a steward reads in DataHub, and the proposal report on it (markdown).

Everything from an incident, a model, a snapshot or an error goes through
:mod:`reflex_actions.report.markdown`, so it shows as text and never renders as markup.
"""

from __future__ import annotations

from reflex_actions.backtest.history import LearningSplit
from reflex_actions.backtest.metrics import (
    BacktestReport,
    Scores,
    in_sample_ids,
    learning_split_scores,
)
from reflex_actions.controls import (
    dump_control_yaml,
    parse_control_spec,
    spec_line,
)
from reflex_actions.lessons.model import (
    BacktestSummary,
    Decision,
    Lesson,
    LessonState,
    Recurrence,
)
from reflex_actions.report import markdown
from reflex_actions.report.backtest import ratio_text
from reflex_actions.report.markdown import code, code_block, code_cell, escape
from reflex_actions.similarity import Resolution
from reflex_actions.times import iso
from reflex_actions.vocabulary import RECURRENCE_TYPE, display_name, names_of
from reflex_actions.wording import plural


def render_definition(lesson: Lesson, title: str) -> str:
    """The lesson page a steward reads in DataHub (markdown). The report is Reflex's own
    markdown, escaped where it was built."""
    source = display_name(lesson.source_dataset or "an unknown dataset")
    lines = [
        f"**{escape(title)}** — state: **{lesson.state.value}**",
        "",
        f"Learned from incident {code(lesson.incident)} on {code(source)}.",
        "",
    ]
    lines += _lifecycle_banner(lesson)
    if any(not d.authenticated for d in lesson.decisions):
        lines += [
            "> **Decisions not authenticated:** DataHub ran with metadata-service "
            "authentication off when the decisions marked *not authenticated* were made, so "
            "the actor shown is whoever the caller claimed to be (`trust_unauthenticated_actors`).",
            "",
        ]
    if lesson.error:
        lines += [
            f"> **Reflex could not go on:** {code(lesson.error)} — fix the cause and confirm "
            "again to retry.",
            "",
        ]
    if lesson.validation_error:
        lines += [
            f"> **Needs a fix before it can be confirmed:** {code(lesson.validation_error)}",
            "",
        ]
    lines += [
        "#### Root cause",
        escape(lesson.root_cause),
        "",
        f"Failure pattern: {code(lesson.failure_pattern)}",
    ]
    proposer = lesson.proposer.name + (
        f" ({lesson.proposer.model})" if lesson.proposer.model else ""
    )
    lines += [
        f"Drafted by the {escape(proposer)} proposer, confidence {lesson.confidence:.0%}. "
        "The draft is a proposal, not an authority: confirm or edit it.",
    ]
    if lesson.proposer.fallback_reason:
        lines.append(f"The model's answer was not used: {escape(lesson.proposer.fallback_reason)}")
    if lesson.rationale:
        lines += ["", f"Rationale: {escape(lesson.rationale)}"]
    if lesson.evidence:
        lines += ["", "#### Evidence"]
        lines += [f"- ({escape(item.source)}) “{escape(item.quote)}”" for item in lesson.evidence]
    if lesson.control:
        readable = dump_control_yaml(parse_control_spec(lesson.control))
        lines += ["", "#### Control", code_block(readable, "yaml")]
        if lesson.learned_from:
            learned = lesson.learned_from
            held = f"{escape(learned.dataset)} {_snapshots(learned.held_out)}"
            lines += [
                "",
                f"Its parameters were learned from {_learned_line(learned)}; held out for the "
                f"backtest: {held if learned.held_out else 'none'}.",
            ]
    else:
        lines += ["", "No control proposed: set `reflex.controlSpec` to propose one."]
    if lesson.report:
        lines += ["", lesson.report.rstrip()]
    if _runs_somewhere(lesson):
        lines += ["", "#### Published on", *_published_on(lesson)]
    if lesson.versions:
        lines += ["", *versions_section(lesson)]
    if lesson.recurrences:
        lines += ["", "#### Recurrences caught"]
        if lesson.older_recurrences:
            lines += [
                f"{lesson.recurrence_count:,} in all; the latest {len(lesson.recurrences):,} "
                "are below. Every one is an incident B in DataHub on the dataset it was caught "
                f"on (its Incidents tab), of type {code(RECURRENCE_TYPE)}, raised by this "
                f"lesson's assertion there; its description names {code(lesson.urn)}.",
                "",
            ]
        lines += [_recurrence_line(r) for r in lesson.recurrences]
    if lesson.decisions:
        lines += ["", "#### Decisions"]
        if lesson.older_decisions:
            lines += [
                f"{lesson.decision_count:,} in all; the latest {len(lesson.decisions):,} are "
                "below (the older ones are counted, no longer kept).",
                "",
            ]
        lines += [_decision_line(d) for d in lesson.decisions]
    return "\n".join(lines) + "\n"


#: Datasets the page names of a scope, and of a version's scope in its table row: a scope
#: may be as large as the estate, and the page is part of the lesson's bounded term.
PAGE_DATASETS = 50
CELL_DATASETS = 5


def _runs_somewhere(lesson: Lesson) -> bool:
    """Whether a version of the lesson is published: on datasets its record lists, or on a
    rule's (or it is still being rolled out)."""
    return bool(lesson.published_scope or lesson.scope_rule or lesson.rollout)


def _published_on(lesson: Lesson) -> list[str]:
    lines = []
    if lesson.rollout is not None:
        lines += [f"*In progress:* {escape(lesson.rollout.progress())}.", ""]
    if (rule := lesson.scope_rule) is not None:
        lines += [
            f"Every dataset matching {code(rule.text())} when the approval was handled: "
            f"{plural(lesson.published_count, 'dataset')}"
            + (" so far" if lesson.rollout else "")
            + f". On each, {code('reflex.coverage')} names this lesson.",
        ]
        if lesson.publish_skipped:
            lines += ["", "Not published on some (the control does not fit them), e.g.:"]
            lines += [f"- {escape(reason)}" for reason in lesson.publish_skipped]
    scope = lesson.published_scope
    lines += [f"- {escape(display_name(urn))}" for urn in scope[:PAGE_DATASETS]]
    if len(scope) > PAGE_DATASETS:
        lines += [
            "",
            f"{len(scope):,} datasets in all; the first {PAGE_DATASETS} are above. On each "
            f"of them, {code('reflex.coverage')} names this lesson and its Quality tab shows the "
            "lesson's assertion.",
        ]
    return lines


def _lifecycle_banner(lesson: Lesson) -> list[str]:
    """What runs now, when that is not simply the lesson's control: a draft waiting while an
    earlier version runs, or nothing at all (retired)."""
    in_force = lesson.approved.number if lesson.approved else None
    if lesson.state is LessonState.RETIRED:
        return [
            f"> **Retired:** none of its controls run (version {in_force} was the last in "
            "force); its recurrences and history stay below. Set `reflex.version` to a "
            "version's number to roll back to it, through approval.",
            "",
        ]
    if lesson.revision is not None and lesson.state is LessonState.PENDING_APPROVAL:
        draft = lesson.next_version
        running = (
            f"version {in_force} stays in force until then"
            if _runs_somewhere(lesson)
            else "nothing runs until then (the lesson was retired)"
        )
        return [
            f"> **Version {draft} waits for approval** ({escape(lesson.revision.origin)}): the "
            f"control and report below are its draft; {running}.",
            "",
        ]
    return []


def versions_section(lesson: Lesson) -> list[str]:
    """The approved versions the lesson keeps: what each ran, where, on what evidence, approved
    by whom."""
    in_force = lesson.approved.number if lesson.approved and _runs_somewhere(lesson) else None
    lines = ["#### Versions", ""]
    if len(lesson.versions) < lesson.version_count:
        lines += [
            f"{lesson.version_count:,} in all; those below are kept, with their control and "
            "scope: `reflex.version` rolls back to one of them, not to an older one.",
            "",
        ]
    lines += [
        "| version | approved by | at | how it came about | control | scope | backtest | digest |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for version in lesson.versions:
        mark = " (in force)" if version.number == in_force else ""
        control = spec_line(version.control)
        scope = names_of(version.scope, CELL_DATASETS) if version.scope else ""
        if version.scope_rule is not None:
            scope = f"rule {version.scope_rule.text()}" + (f" and {scope}" if scope else "")
        lines.append(
            f"| {version.number}{mark} | {escape(version.actor)} | {iso(version.at)} "
            f"| {escape(version.origin)} | {code_cell(control)} | {escape(scope)} "
            f"| {_backtest_cell(version.backtest)} | {code_cell(version.digest[:12])} |"
        )
    return lines


def _backtest_cell(summary: BacktestSummary | None) -> str:
    if summary is None:
        return "no history"
    scores = summary.scope
    return (
        f"precision {ratio_text(scores.precision, scores, 'precision')}, recall "
        f"{ratio_text(scores.recall, scores, 'recall')}, "
        f"{plural(scores.false_positives, 'false alarm')}, "
        f"{scores.coverage.evaluable_snapshots} of {plural(scores.coverage.snapshots, 'snapshot')}"
    )


def _decision_line(decision: Decision) -> str:
    line = f"- {escape(decision.decision)} by {escape(decision.actor)} at {iso(decision.at)}"
    line += "" if decision.authenticated else " (*not authenticated*)"
    return line + (f": {code(decision.detail)}" if decision.detail else "")


def _recurrence_line(recurrence: Recurrence) -> str:
    line = (
        f"- {code(recurrence.incident)} on {escape(display_name(recurrence.dataset))} "
        f"(snapshot {code(recurrence.snapshot)})"
    )
    resolved = recurrence.resolved
    if resolved:
        line += f", resolved by {escape(resolved.by)} at {iso(resolved.at)}"
        if resolved.note:
            line += f": {escape(resolved.note)}"
    return line


def proposal_report(compiled_sql: str, resolution: Resolution, backtest_section: str) -> str:
    """What a steward approves on: the compiled control, the similar assets, the backtest."""
    return "\n".join(
        [
            "#### Compiled control (DuckDB SQL)",
            markdown.code_block(compiled_sql, "sql"),
            "",
            candidates_section(resolution),
            "",
            backtest_section,
        ]
    )


def candidates_section(resolution: Resolution) -> str:
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


def scope_summary(scores: Scores, scope_size: int) -> str:
    """The figures for what approval would publish (the source and the recommended
    candidates); the tables below also cover the near misses, for comparison."""
    precision = "n/a" if scores.precision is None else f"{scores.precision:.0%}"
    recall = "n/a" if scores.recall is None else f"{scores.recall:.0%}"
    return (
        f"**Recommended scope** ({plural(scope_size, 'dataset')}): precision {precision}, "
        f"recall {recall}, {plural(scores.true_positives, 'labelled failure')} caught, "
        f"{plural(scores.false_positives, 'false alarm')}, {scores.false_negatives} missed, "
        f"{plural(scores.not_evaluable, 'snapshot')} not evaluable.\n\n"
    )


#: Snapshot ids listed one by one; a longer run is shown by its count and span.
MAX_LISTED_SNAPSHOTS = 12


def learning_section(report: BacktestReport, learned: LearningSplit | None) -> str:
    """The backtest split into the snapshots the control's parameters were learned from
    (in-sample: they flatter it) and all the others (held out), with which were which; empty
    when the lesson learned nothing from the history."""
    if learned is None:
        return ""
    scores = learning_split_scores(report.per_snapshot, learned)
    in_sample = in_sample_ids(learned)
    held_out: dict[str, list[str]] = {}
    for o in report.per_snapshot:
        if (o.dataset, o.snapshot_id) not in in_sample:
            held_out.setdefault(o.dataset, []).append(o.snapshot_id)
    held_line = "; ".join(f"{escape(name)} {_snapshots(ids)}" for name, ids in held_out.items())
    lines = [
        "#### In-sample and held-out backtest",
        "",
        "The control's parameters were learned from the earlier snapshots of the source's "
        "history (and the incident's own, to find what broke): figures on those are in-sample "
        "and flatter it. The held-out figures are on every other snapshot: the source's later "
        "ones and the candidates' histories.",
        "",
        "| figures | snapshots | TP | FP | TN | FN | not evaluable | precision | recall |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        _scores_row("in-sample (learned from)", scores.in_sample),
        _scores_row("held out", scores.held_out),
        "",
        f"- learned from: {_learned_line(learned)}",
        f"- held out: {held_line or 'none'}",
    ]
    if learned.note:
        lines += ["", f"In {escape(learned.dataset)}, {escape(learned.note)}."]
    return "\n".join(lines) + "\n\n"


def _learned_line(learned: LearningSplit) -> str:
    line = f"{escape(learned.dataset)} {_snapshots(learned.normal)}"
    if learned.failures:
        line += f" and the incident's {_snapshots(learned.failures)}"
    return line


def _scores_row(label: str, scores: Scores) -> str:
    return (
        f"| {label} | {scores.coverage.snapshots} | {scores.true_positives} "
        f"| {scores.false_positives} | {scores.true_negatives} | {scores.false_negatives} "
        f"| {scores.not_evaluable} | {ratio_text(scores.precision, scores, 'precision')} "
        f"| {ratio_text(scores.recall, scores, 'recall')} |"
    )


def _snapshots(ids: list[str]) -> str:
    """Snapshot ids (in order) as a steward reads them: all of them, or their count and span."""
    if len(ids) <= MAX_LISTED_SNAPSHOTS:
        return ", ".join(escape(sid) for sid in ids) or "none"
    return f"{len(ids)} snapshots {escape(ids[0])} … {escape(ids[-1])}"
