"""A lesson on its glossary term: machine state in customProperties, a readable definition.

The term urn derives from incident A's urn, so a redelivered resolution finds the lesson it
already drafted. Workflow state the steward edits lives in structured properties.
"""

from __future__ import annotations

import hashlib
import re

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import GlossaryTermInfoClass, StructuredPropertiesClass
from pydantic import ValidationError

from reflex_actions.catalog.base import Catalog, CatalogError
from reflex_actions.catalog.steward import acting_as
from reflex_actions.controls import dump_control_line, dump_control_yaml, parse_control_spec
from reflex_actions.lessons.model import Decision, Lesson, Recurrence
from reflex_actions.markdown import code, code_block, escape
from reflex_actions.vocabulary import LESSONS_NODE, display_name

LESSON_PROPERTY = "reflex.lesson"
LESSON_PREFIX = "urn:li:glossaryTerm:reflex.lesson."


def lesson_urn_for(incident_urn: str) -> str:
    """A readable, deterministic term urn: the incident id, or a hash when it has odd characters."""
    incident_id = incident_urn.removeprefix("urn:li:incident:")
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", incident_id):
        incident_id = hashlib.sha1(incident_urn.encode()).hexdigest()[:16]
    return LESSON_PREFIX + incident_id


def load_lesson(catalog: Catalog, urn: str) -> Lesson | None:
    info = catalog.get_aspect(urn, GlossaryTermInfoClass)
    raw = (info.customProperties or {}).get(LESSON_PROPERTY) if info else None
    if raw is None:
        return None
    try:
        return Lesson.model_validate_json(raw)
    except ValidationError as error:
        raise CatalogError(f"the lesson stored on {urn} is malformed: {error}") from None


def control_yaml(lesson: Lesson) -> str:
    """The lesson's control as ``reflex.controlSpec`` holds it: one line of flow YAML, since
    DataHub's UI edits that property in a one-line input that strips newlines."""
    return dump_control_line(parse_control_spec(lesson.control)) if lesson.control else ""


def render_definition(lesson: Lesson, title: str) -> str:
    """The lesson page a steward reads in DataHub (markdown).

    Everything from an incident, a model, a snapshot or an error goes through
    :mod:`reflex_actions.markdown`, so it shows as text and never renders as markup. The report
    is Reflex's own markdown, escaped where it was built.
    """
    source = display_name(lesson.source_dataset or "an unknown dataset")
    lines = [
        f"**{escape(title)}** — state: **{lesson.state.value}**",
        "",
        f"Learned from incident {code(lesson.incident)} on {code(source)}.",
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
    else:
        lines += ["", "No control proposed: set `reflex.controlSpec` to propose one."]
    if lesson.report:
        lines += ["", lesson.report.rstrip()]
    if lesson.published_scope:
        lines += ["", "#### Published on"]
        lines += [f"- {escape(display_name(urn))}" for urn in lesson.published_scope]
    if lesson.recurrences:
        lines += ["", "#### Recurrences caught"]
        lines += [_recurrence_line(r) for r in lesson.recurrences]
    if lesson.decisions:
        lines += ["", "#### Decisions"]
        lines += [_decision_line(d) for d in lesson.decisions]
    return "\n".join(lines) + "\n"


def _decision_line(decision: Decision) -> str:
    line = f"- {escape(decision.decision)} by {escape(decision.actor)} at {decision.at}"
    return line + (f": {code(decision.detail)}" if decision.detail else "")


def _recurrence_line(recurrence: Recurrence) -> str:
    line = (
        f"- {code(recurrence.incident)} on {escape(display_name(recurrence.dataset))} "
        f"(snapshot {code(recurrence.snapshot)})"
    )
    resolved = recurrence.resolved
    if resolved:
        line += f", resolved by {escape(resolved.by)} at {resolved.at}"
        if resolved.note:
            line += f": {escape(resolved.note)}"
    return line


def lesson_term_mcp(lesson: Lesson, title: str, actor: str) -> MetadataChangeProposalWrapper:
    info = GlossaryTermInfoClass(
        name=f"Lesson: {title}"[:200],
        definition=render_definition(lesson, title),
        termSource="INTERNAL",
        parentNode=LESSONS_NODE,
        customProperties={
            LESSON_PROPERTY: lesson.model_dump_json(),
            "reflex.incident": lesson.incident,
        },
    )
    return acting_as(actor, lesson.urn, info)


def save_lesson(catalog: Catalog, lesson: Lesson, actor: str) -> None:
    """Rewrite the lesson's term (definition and machine state); the title is kept."""
    current = catalog.get_aspect(lesson.urn, GlossaryTermInfoClass)
    title = current.name.removeprefix("Lesson: ") if current and current.name else lesson.incident
    catalog.emit([lesson_term_mcp(lesson, title, actor)])


def structured_values(catalog: Catalog, urn: str, property_urn: str) -> list[str | float]:
    """The current values of one structured property on an entity."""
    properties = catalog.get_aspect(urn, StructuredPropertiesClass)
    for assignment in properties.properties if properties else []:
        if assignment.propertyUrn == property_urn:
            return list(assignment.values)
    return []


def as_text(values: list[str | float]) -> str:
    return str(values[0]) if values else ""
