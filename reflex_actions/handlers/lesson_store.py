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
from reflex_actions.controls import spec_line
from reflex_actions.lessons.model import Lesson
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.vocabulary import LESSONS_NODE

LESSON_PROPERTY = "reflex.lesson"
#: What a lesson term's name starts with; the rest is the lesson's title.
TITLE_PREFIX = "Lesson: "
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
    return spec_line(lesson.control) if lesson.control else ""


def lesson_term_mcp(lesson: Lesson, title: str, actor: str) -> MetadataChangeProposalWrapper:
    info = GlossaryTermInfoClass(
        name=f"{TITLE_PREFIX}{title}"[:200],
        definition=render_definition(lesson, title),
        termSource="INTERNAL",
        parentNode=LESSONS_NODE,
        customProperties={
            LESSON_PROPERTY: lesson.model_dump_json(),
            "reflex.incident": lesson.incident,
        },
    )
    return acting_as(actor, lesson.urn, info)


def term_title(term: GlossaryTermInfoClass | None) -> str:
    """The lesson's title on its term: the term's name less the prefix Reflex gives it."""
    return term.name.removeprefix(TITLE_PREFIX) if term and term.name else ""


def save_lesson(catalog: Catalog, lesson: Lesson, actor: str) -> None:
    """Rewrite the lesson's term (definition and machine state); the title is kept."""
    title = term_title(catalog.get_aspect(lesson.urn, GlossaryTermInfoClass)) or lesson.incident
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
