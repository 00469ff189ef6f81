"""The DataHub side of a published control: its assertion, run events and recurrence incidents.

Urns are derived from their inputs so that redelivered events rewrite the same entities:
an assertion from (lesson, dataset), incident B from (assertion, snapshot id).
"""

from __future__ import annotations

import functools
import hashlib
import json

from datahub.emitter.mce_builder import make_schema_field_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    AssertionInfoClass,
    AssertionResultClass,
    AssertionResultErrorClass,
    AssertionResultErrorTypeClass,
    AssertionResultTypeClass,
    AssertionRunEventClass,
    AssertionRunStatusClass,
    AssertionSourceClass,
    AssertionSourceTypeClass,
    AssertionTypeClass,
    AuditStampClass,
    CustomAssertionInfoClass,
    IncidentInfoClass,
    IncidentSourceClass,
    IncidentSourceTypeClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
)

from reflex_actions.catalog.base import Catalog
from reflex_actions.catalog.steward import acting_as
from reflex_actions.controls import Control, dump_control_yaml, parse_control_yaml
from reflex_actions.controls.base import MAX_COUNT
from reflex_actions.executor import ControlResult
from reflex_actions.handlers.directives import Outbox
from reflex_actions.handlers.own_runs import OwnRuns
from reflex_actions.lessons.model import Lesson, Recurrence
from reflex_actions.report.markdown import code, escape
from reflex_actions.sql import shown_relation, shown_sql
from reflex_actions.vocabulary import RECURRENCE_TYPE, display_name

CONTROL_PROPERTY = "reflex.control"
LESSON_OF_ASSERTION = "reflex.lesson"


def _digest(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:24]


def assertion_urn(lesson_urn: str, dataset_urn: str) -> str:
    return f"urn:li:assertion:reflex-{_digest(lesson_urn, dataset_urn)}"


def recurrence_incident_urn(assertion: str, snapshot_id: str) -> str:
    return f"urn:li:incident:reflex-{_digest(assertion, snapshot_id)}"


def assertion_mcp(
    lesson: Lesson, dataset_urn: str, control: Control, actor: str
) -> MetadataChangeProposalWrapper:
    """The control on one dataset as an external custom assertion (its Quality tab in OSS)."""
    fields = control.dataset_fields()
    spec = dump_control_yaml(control)
    info = AssertionInfoClass(
        type=AssertionTypeClass.CUSTOM,
        customAssertion=CustomAssertionInfoClass(
            type=f"Reflex {control.type}",
            entity=dataset_urn,
            field=make_schema_field_urn(dataset_urn, fields[0]) if len(fields) == 1 else None,
            logic=shown_logic(spec),
        ),
        source=AssertionSourceClass(type=AssertionSourceTypeClass.EXTERNAL),
        description=f"{control.describe()} (Reflex lesson from {lesson.incident})",
        customProperties={
            LESSON_OF_ASSERTION: lesson.urn,
            "reflex.incident": lesson.incident,
            CONTROL_PROPERTY: spec,
        },
    )
    return acting_as(actor, assertion_urn(lesson.urn, dataset_urn), info)


@functools.lru_cache(maxsize=256)
def shown_logic(spec: str) -> str:
    """A control's SQL as its assertion shows it: the same on every dataset it runs on with the
    same fields, so a rollout over thousands compiles and renders it once."""
    return shown_sql(parse_control_yaml(spec).compile(shown_relation()))


#: nativeResults key of a run's row count and the earlier ones it was judged against (JSON)
ROW_COUNTS = "row_counts"
#: Most row counts a run event carries forward.
MAX_ROW_COUNTS = 365


def row_counts_after(last: AssertionRunEventClass | None) -> list[int]:
    """The row counts an assertion's runs have seen, oldest first, as its latest run event
    (``last``) carries them forward; empty when it has none (or they cannot be read)."""
    native = (last.result.nativeResults or {}) if last and last.result else {}
    text = native.get(ROW_COUNTS, "[]")
    try:
        counts = json.loads(text) if len(text) <= MAX_ROW_COUNTS * 16 else None
    except ValueError:
        return []
    if not isinstance(counts, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= MAX_COUNT for c in counts
    ):
        return []
    return counts[-MAX_ROW_COUNTS:]


def run_event_mcp(
    assertion: str,
    dataset_urn: str,
    timestamp_ms: int,
    run_id: str,
    result: ControlResult | None,
    error: str | None,
    actor: str,
    runs: OwnRuns,
    carried_counts: list[int] | None = None,
) -> MetadataChangeProposalWrapper:
    """One execution of the control: SUCCESS, FAILURE, or ERROR when it could not run,
    sealed as Reflex's own (``runs``). An ERROR run carries the earlier runs' row counts
    forward (``carried_counts``), so one unreadable landing does not cost a volume control its
    baseline."""
    if result is None:
        outcome = AssertionResultClass(
            type=AssertionResultTypeClass.ERROR,
            error=AssertionResultErrorClass(
                type=AssertionResultErrorTypeClass.SOURCE_QUERY_FAILED,
                properties={"message": (error or "unknown error")[:2000]},
            ),
            nativeResults={ROW_COUNTS: json.dumps(carried_counts)} if carried_counts else None,
        )
    else:
        outcome = AssertionResultClass(
            type=AssertionResultTypeClass.SUCCESS
            if result.passed
            else AssertionResultTypeClass.FAILURE,
            rowCount=result.rows_scanned,
            unexpectedCount=result.violation_count,
            actualAggValue=float(result.violation_count),
            nativeResults={
                "snapshot": result.snapshot,
                "violation_count": str(result.violation_count),
                "allowed_violations": str(result.allowed_violations),
                "sample": json.dumps(result.sample, default=str)[:2000],
                **_reference_results(result),
                **_row_counts(result),
                **_measures(result),
            },
        )
    event = AssertionRunEventClass(
        timestampMillis=timestamp_ms,
        runId=run_id,
        asserteeUrn=dataset_urn,
        assertionUrn=assertion,
        status=AssertionRunStatusClass.COMPLETE,
        result=outcome,
    )
    return acting_as(actor, assertion, runs.seal(event))


def _reference_results(result: ControlResult) -> dict[str, str]:
    """Which parent snapshot a referencing control's run was checked against."""
    if result.reference is None:
        return {}
    return {
        "reference_dataset": result.reference.dataset,
        "reference_snapshot": result.reference.snapshot,
        "reference_snapshot_id": result.reference.snapshot_id,
        "reference_chosen": result.reference.chosen,
    }


def _row_counts(result: ControlResult) -> dict[str, str]:
    """A volume run's count after the earlier ones, so the next run can judge against them."""
    if result.earlier_counts is None:
        return {}
    counts = [*result.earlier_counts, result.rows_scanned][-MAX_ROW_COUNTS:]
    return {ROW_COUNTS: json.dumps(counts)}


def _measures(result: ControlResult) -> dict[str, str]:
    """What a table-level control measured (an age, a count and its bounds), as text."""
    return {
        f"measured_{name}": str(value)[:200]
        for name, value in (result.measures or {}).items()
        if value is not None
    }


def _checked_against(result: ControlResult) -> str:
    """The incident's paragraph on the parent snapshot it was checked against, if any."""
    reference = result.reference
    if reference is None:
        return ""
    return (
        f"\n\nChecked against {escape(display_name(reference.dataset))} snapshot "
        f"{escape(reference.snapshot_id)} ({escape(reference.chosen)})."
    )


def record_recurrence(
    catalog: Catalog,
    out: Outbox,
    lesson: Lesson,
    lesson_title: str,
    assertion: str,
    dataset_urn: str,
    snapshot_id: str,
    result: ControlResult,
    timestamp_ms: int,
    actor: str,
    extra: str = "",
) -> str:
    """Decide incident B (the lesson's control caught the failure again, on this dataset) unless
    it exists, and note it on the lesson unless noted; the caller saves the lesson. Safe to
    repeat after a crash at any point. Its description is markdown (DataHub renders it): every
    name, value and note in it is escaped here, ``extra`` (a paragraph) by the caller; its title
    is plain text."""
    incident = recurrence_incident_urn(assertion, snapshot_id)
    if catalog.get_aspect(incident, IncidentInfoClass) is None:
        sample = "\n".join(f"- {code(json.dumps(row, default=str))}" for row in result.sample)
        description = (
            f"Reflex control '{escape(result.control)}' failed on "
            f"{escape(display_name(dataset_urn))} for snapshot {escape(snapshot_id)} "
            f"({escape(result.snapshot)}): {result.violation_count} violation(s) in "
            f"{result.rows_scanned} row(s), {result.allowed_violations} allowed.\n\n"
            f"This is a recurrence of lesson '{escape(lesson_title)}' ({escape(lesson.urn)}), "
            f"learned from incident {escape(lesson.incident)}.\n\n"
            f"Worst offenders:\n{sample or '- (none sampled)'}"
            + _checked_against(result)
            + (f"\n\n{extra}" if extra else "")
        )
        stamp = AuditStampClass(time=timestamp_ms, actor=actor)
        info = IncidentInfoClass(
            type=IncidentTypeClass.CUSTOM,
            customType=RECURRENCE_TYPE,
            title=f"Recurrence on {display_name(dataset_urn)}: {lesson_title}"[:300],
            description=description,
            entities=[dataset_urn],
            status=IncidentStatusClass(state=IncidentStateClass.ACTIVE, lastUpdated=stamp),
            source=IncidentSourceClass(
                type=IncidentSourceTypeClass.ASSERTION_FAILURE, sourceUrn=assertion
            ),
            startedAt=timestamp_ms,
            created=stamp,
        )
        out.emit(acting_as(actor, incident, info))
    lesson.note_recurrence(
        Recurrence(incident=incident, dataset=dataset_urn, snapshot=snapshot_id, at=timestamp_ms)
    )
    return incident
