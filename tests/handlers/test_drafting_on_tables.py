"""Drafting a lesson whose source dataset's history is its table's partitions: the incident's
dates label the partitions they point at, as they label a folder's snapshot files."""

from __future__ import annotations

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
)

from reflex_actions.handlers.context import HandlerContext
from reflex_actions.handlers.directives import apply
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.lesson_store import lesson_urn_for, load_lesson
from tests.engines.postgres_server import PostgresServer, postgres_server
from tests.handlers.builders import STEWARD, change
from tests.handlers.test_proposal_on_tables import (
    SETTLEMENTS,
    URL_VARIABLE,
    estate,
    root,
    settlements_table,
)

__all__ = ["estate", "postgres_server", "root", "settlements_table"]  # fixtures, used by name

INCIDENT = "urn:li:incident:settlements-dup"


def _incident(state: str) -> IncidentInfoClass:
    stamp = AuditStampClass(time=1, actor=STEWARD)
    return IncidentInfoClass(
        type=IncidentTypeClass.OPERATIONAL,
        title="Duplicate settlements",
        description="The 2026-09-03 load of finance.settlements holds duplicate transactions.",
        entities=[SETTLEMENTS],
        status=IncidentStatusClass(
            state=state, message="made the load idempotent", lastUpdated=stamp
        ),
        created=stamp,
    )


def test_the_incidents_date_labels_the_partition_of_a_table_source(
    settlements_table: PostgresServer, estate: HandlerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(URL_VARIABLE, settlements_table.url())

    on_incident_change(
        change(
            INCIDENT,
            _incident(IncidentStateClass.RESOLVED),
            _incident(IncidentStateClass.ACTIVE),
            time_ms=20,
        ),
        estate,
    )

    apply(estate.out.directives, estate.catalog, estate.config.service_actor)
    drafted = load_lesson(estate.catalog, lesson_urn_for(INCIDENT))
    assert drafted is not None
    assert drafted.dated_failures == ["2026-09-03"]  # 09-02 and 09-04 are labelled already
