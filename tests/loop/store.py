"""Reading the embedded store behind Reflex's back, and driving demo stages in tests.

The helpers read DataHub Lite's ``metadata_aspect_v2`` table with plain sqlite3, so the tests do
not check Reflex with its own catalog code. In Lite, version 0 is the latest value of an aspect
and versions 1..n are every value written, in order (their rowids grow with each write).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import post_json_transform
from datahub.metadata.schema_classes import (
    AuditStampClass,
    IncidentInfoClass,
    IncidentSourceTypeClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    OperationClass,
    OperationTypeClass,
    StructuredPropertiesClass,
    _Aspect,
)

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.demo.metadata import estate_mcps
from reflex_actions.demo.run import STEWARD, Demo
from reflex_actions.handlers.lesson_store import LESSON_PROPERTY
from reflex_actions.lessons.model import Lesson
from reflex_actions.source.lite_change_feed.lite_change_feed_source import DEFAULT_ACTOR

AspectT = TypeVar("AspectT", bound=_Aspect)
Row = tuple[str, str, int, str]

STORE = "reflex.db"


def store_of(workdir: Path) -> Path:
    return workdir / STORE


def _query(store: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(store)) as db:
        return db.execute(sql, params).fetchall()


def all_rows(store: Path) -> list[Row]:
    """Every row of the aspect table (urn, aspect_name, version, metadata), sorted."""
    return _query(
        store,
        "SELECT urn, aspect_name, version, metadata FROM metadata_aspect_v2 "
        "ORDER BY urn, aspect_name, version",
    )


def _parse(aspect_class: type[AspectT], metadata: str) -> AspectT:
    return aspect_class.from_obj(post_json_transform(json.loads(metadata)))


def latest(store: Path, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
    """The current value of one aspect (Lite's version 0), or None."""
    rows = _query(
        store,
        "SELECT metadata FROM metadata_aspect_v2 WHERE urn = ? AND aspect_name = ? AND version = 0",
        urn,
        aspect_class.ASPECT_NAME,
    )
    return _parse(aspect_class, rows[0][0]) if rows else None


def history(store: Path, urn: str, aspect_class: type[AspectT]) -> list[tuple[int, AspectT]]:
    """Every value written to one aspect, oldest first, with the rowid of each write."""
    rows = _query(
        store,
        "SELECT rowid, metadata FROM metadata_aspect_v2 "
        "WHERE urn = ? AND aspect_name = ? AND version > 0 ORDER BY version",
        urn,
        aspect_class.ASPECT_NAME,
    )
    return [(rowid, _parse(aspect_class, metadata)) for rowid, metadata in rows]


def urns_with(store: Path, aspect_name: str) -> list[str]:
    """The entities holding a current value of this aspect."""
    rows = _query(
        store,
        "SELECT urn FROM metadata_aspect_v2 WHERE aspect_name = ? AND version = 0 ORDER BY urn",
        aspect_name,
    )
    return [urn for (urn,) in rows]


def incidents_b(store: Path, dataset: str | None = None) -> dict[str, IncidentInfoClass]:
    """Incidents raised from an assertion failure (incident B), optionally on one dataset."""
    found = {}
    for urn in urns_with(store, IncidentInfoClass.ASPECT_NAME):
        info = latest(store, urn, IncidentInfoClass)
        assert info is not None
        if info.source is None or info.source.type != IncidentSourceTypeClass.ASSERTION_FAILURE:
            continue
        if dataset is None or dataset in info.entities:
            found[urn] = info
    return found


def property_values(store: Path, urn: str, property_urn: str) -> list[str | float]:
    properties = latest(store, urn, StructuredPropertiesClass)
    for assignment in properties.properties if properties else []:
        if assignment.propertyUrn == property_urn:
            return list(assignment.values)
    return []


def stored_lesson(store: Path, urn: str) -> Lesson:
    """The lesson's machine state as stored on its glossary term."""
    rows = _query(
        store,
        "SELECT metadata FROM metadata_aspect_v2 "
        "WHERE urn = ? AND aspect_name = 'glossaryTermInfo' AND version = 0",
        urn,
    )
    assert rows, f"no glossary term {urn}"
    return Lesson.model_validate_json(json.loads(rows[0][0])["customProperties"][LESSON_PROPERTY])


def land(demo: Demo, dataset: str, snapshot: str | Path | None, snapshot_id: str) -> int:
    """Announce new data on ``dataset`` as an ``operation`` (what a loader would emit); returns
    the operation's timestamp."""
    properties = {"snapshot_id": snapshot_id}
    if snapshot is not None:
        properties["snapshot"] = str(snapshot)
    operation = OperationClass(
        timestampMillis=demo.tick(),
        operationType=OperationTypeClass.INSERT,
        customProperties=properties,
        lastUpdatedTimestamp=demo.clock,
    )
    demo.catalog.emit([acting_as(DEFAULT_ACTOR, dataset, operation)])
    return demo.clock


def replay_from_start(demo: Demo) -> None:
    """Forget the source's offset and let the pipeline handle the whole event log again, as
    after a lost offset or a deliberate replay."""
    offset = store_of(demo.workdir).with_name(STORE + ".reflex-offset")
    offset.unlink()
    demo.react()


def demo_with_resolved(workdir: Path, incident: MetadataChangeProposalWrapper, note: str) -> Demo:
    """The embedded store in ``workdir`` (whose snapshot histories are written) with the demo
    estate and ``incident``, which the steward then resolves with ``note``."""
    demo = Demo(workdir, say=lambda _: None)
    demo.catalog.emit([*bootstrap_mcps(), *estate_mcps(), incident])
    demo.react()
    resolve_incident(demo.catalog, str(incident.entityUrn), note, STEWARD)
    demo.react()
    return demo


def active_incident(
    urn: str, dataset: str, title: str, description: str, actor: str = STEWARD
) -> MetadataChangeProposalWrapper:
    """An operational incident raised on ``dataset`` and still open (what a team files)."""
    stamp = AuditStampClass(time=1789000000000, actor=actor)
    return MetadataChangeProposalWrapper(
        entityUrn=urn,
        aspect=IncidentInfoClass(
            type=IncidentTypeClass.OPERATIONAL,
            title=title,
            description=description,
            entities=[dataset],
            status=IncidentStatusClass(state=IncidentStateClass.ACTIVE, lastUpdated=stamp),
            created=stamp,
        ),
    )


def write_estate_snapshot(path: Path, dataset: str, values: dict[str, list[Any]]) -> Path:
    """A snapshot of estate dataset ``dataset`` in its own schema: these columns' values, NULL
    in every other column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reflex_actions.demo.estate import DATASETS
    from reflex_actions.demo.history import arrow_schema

    schema = arrow_schema(DATASETS[dataset])
    rows = len(next(iter(values.values())))
    columns = [
        pa.array(values[field.name], field.type)
        if field.name in values
        else pa.nulls(rows, field.type)
        for field in schema
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), path)
    return path
