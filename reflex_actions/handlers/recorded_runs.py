"""DataHub recorded a new fact of a covered dataset (a ``datasetProfile``, a ``schemaMetadata``):
judge the controls that fact settles on its own; a failure raises incident B."""

from __future__ import annotations

from datahub.metadata.schema_classes import DatasetProfileClass, SchemaMetadataClass

from reflex_actions.catalog.translate import fields_of
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.runs import RecordedFact, covered_controls, judge_fact, profile_fact
from reflex_actions.kinds.base import Trigger
from reflex_actions.sql import RecordedFacts
from reflex_actions.times import iso


def schema_fact(schema: SchemaMetadataClass | None, time_ms: int) -> RecordedFact | None:
    if schema is None:
        return None
    columns = tuple((f.name, f.native_type, f.type) for f in fields_of(schema))
    return RecordedFact(
        "columns", RecordedFacts(columns=columns), time_ms, f"schema-{iso(time_ms)}"
    )


def on_recorded_change(change: AspectChange, ctx: HandlerContext) -> None:
    """DataHub recorded a new profile or schema of a covered dataset: judge the controls that
    this fact settles on it alone (a profile's row count, the schema's columns)."""
    if change.aspect_name == DatasetProfileClass.ASPECT_NAME:
        fact = profile_fact(change.typed(DatasetProfileClass))
    else:
        fact = schema_fact(change.typed(SchemaMetadataClass), change.recorded_time)
    if fact is None:
        return
    for item in covered_controls(change.urn, ctx, change.time_ms, Trigger.ASPECT_CHANGE):
        if fact.name in item.control.judged_on_recorded() and not item.judged(fact.run_id):
            judge_fact(item, change.urn, fact, ctx)
