"""A lesson on its glossary term: machine state in customProperties, a readable definition.

The term urn derives from incident A's urn, so a redelivered resolution finds the lesson it
already drafted. Workflow state the steward edits lives in structured properties.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import pre_json_transform
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
#: Most bytes a lesson's term takes (its glossaryTermInfo as JSON: the page and the record):
#: DataHub's broker caps a message at 5 MB, and every change log of the term carries its
#: previous value beside the new one.
MAX_TERM_BYTES = 256 * 1024
#: Most bytes a published scope takes in the lesson's record (once there, packed when large:
#: see ``Lesson.record_json``), leaving the rest of the term to its page, report and history.
#: About 14,000 datasets of typical names (``urn:li:dataset:(urn:li:dataPlatform:postgres,
#: db.schema.table,PROD)``, packed ~9x); the page names the first few.
MAX_SCOPE_BYTES = MAX_TERM_BYTES // 2
#: The smallest share of its records a term keeps to stay within MAX_TERM_BYTES: one of each.
MIN_SHARE = 1 / 256

logger = logging.getLogger(__name__)


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
    """The lesson's term, its page and its record, within MAX_TERM_BYTES whatever its history:
    the latest of each record (``Lesson.bounded``), fewer when the term would be larger."""
    share = 1.0
    info = _term_info(lesson.bounded(share), title)
    while (size := term_bytes(info)) > MAX_TERM_BYTES and share > MIN_SHARE:
        share /= 2
        info = _term_info(lesson.bounded(share), title)
    if size > MAX_TERM_BYTES:
        logger.warning(
            "lesson %s: its term takes %d bytes, over %d, even with one decision, recurrence "
            "and version kept: its report or scope is that large",
            lesson.urn,
            size,
            MAX_TERM_BYTES,
        )
    return acting_as(actor, lesson.urn, info)


def _term_info(lesson: Lesson, title: str) -> GlossaryTermInfoClass:
    return GlossaryTermInfoClass(
        name=f"{TITLE_PREFIX}{title}"[:200],
        definition=render_definition(lesson, title),
        termSource="INTERNAL",
        parentNode=LESSONS_NODE,
        customProperties={
            LESSON_PROPERTY: lesson.record_json(),
            "reflex.incident": lesson.incident,
        },
    )


def term_bytes(info: GlossaryTermInfoClass) -> int:
    """The term's size as an aspect's JSON, the way DataHub's emitter serialises it."""
    return len(json.dumps(pre_json_transform(info.to_obj())).encode())


def term_title(term: GlossaryTermInfoClass | None) -> str:
    """The lesson's title on its term: the term's name less the prefix Reflex gives it."""
    return term.name.removeprefix(TITLE_PREFIX) if term and term.name else ""


def lesson_title(catalog: Catalog, lesson: Lesson) -> str:
    """The lesson's title as its term shows it (its incident's urn before the term has one)."""
    return term_title(catalog.get_aspect(lesson.urn, GlossaryTermInfoClass)) or lesson.incident


def save_lesson(catalog: Catalog, lesson: Lesson, actor: str) -> None:
    """Rewrite the lesson's term (definition and machine state); the title is kept."""
    catalog.emit([lesson_term_mcp(lesson, lesson_title(catalog, lesson), actor)])


def structured_values(catalog: Catalog, urn: str, property_urn: str) -> list[str | float]:
    """The current values of one structured property on an entity."""
    properties = catalog.get_aspect(urn, StructuredPropertiesClass)
    for assignment in properties.properties if properties else []:
        if assignment.propertyUrn == property_urn:
            return list(assignment.values)
    return []


def as_text(values: list[str | float]) -> str:
    return str(values[0]) if values else ""
