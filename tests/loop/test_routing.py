"""The action drops what it does not route without touching the store or reading the aspect."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    ChangeTypeClass,
    GenericAspectClass,
    MetadataChangeLogClass,
)
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import (
    METADATA_CHANGE_LOG_EVENT_V1_TYPE,
    MetadataChangeLogEvent,
)

from reflex_actions.action.reflex_action import ROUTES, ReflexAction
from reflex_actions.catalog.base import Catalog
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.config import ReflexConfig

UNRELATED = [
    ("dataset", "datasetProperties"),
    ("chart", "chartInfo"),
    ("dataset", "glossaryTerms"),
    ("corpuser", "corpUserInfo"),
    ("glossaryTerm", "glossaryTermInfo"),
    # routed aspect names on entity types Reflex does not watch for them
    ("chart", "structuredProperties"),
    ("dashboard", "operation"),
    ("corpGroup", "corpUserStatus"),
]
EVENTS = 10_000


class CountingCatalog:
    """Counts every catalog method called through it."""

    def __init__(self, inner: Catalog) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attribute(*args, **kwargs)

        return counted


def _urn(entity_type: str, n: int) -> str:
    if entity_type == "dataset":
        return f"urn:li:dataset:(urn:li:dataPlatform:snowflake,db.table_{n},PROD)"
    if entity_type in ("chart", "dashboard"):
        return f"urn:li:{entity_type}:(looker,{entity_type}_{n})"
    return f"urn:li:{entity_type}:thing_{n}"


def _envelope(entity_type: str, aspect_name: str, n: int, value: bytes) -> EventEnvelope:
    mcl = MetadataChangeLogClass(
        entityType=entity_type,
        entityUrn=_urn(entity_type, n),
        changeType=ChangeTypeClass.UPSERT,
        aspectName=aspect_name,
        aspect=GenericAspectClass(value=value, contentType="application/json"),
        created=AuditStampClass(time=n, actor="urn:li:corpuser:datahub"),
    )
    return EventEnvelope(
        METADATA_CHANGE_LOG_EVENT_V1_TYPE, MetadataChangeLogEvent.from_class(mcl), {}
    )


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[ReflexAction, CountingCatalog]]:
    catalog = CountingCatalog(LiteCatalog(tmp_path / "reflex.db"))
    action = ReflexAction(ReflexConfig(), catalog)  # type: ignore[arg-type]
    # at its start the action looks for a rollout a crash interrupted: one read, no event's
    deadline = time.monotonic() + 10
    while not catalog.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert catalog.calls == Counter({"terms_under": 1})
    catalog.calls.clear()
    yield action, catalog
    action.close()


def test_unrelated_events_never_reach_the_catalog(
    counted: tuple[ReflexAction, CountingCatalog], caplog: pytest.LogCaptureFixture
) -> None:
    action, catalog = counted
    assert not {key for key in UNRELATED if key in ROUTES}
    # not even JSON: an event that was parsed would be logged as malformed
    events = [_envelope(*UNRELATED[n % len(UNRELATED)], n, b"\xff not json") for n in range(EVENTS)]
    with caplog.at_level(logging.DEBUG, logger="reflex_actions"):
        for event in events:
            action.act(event)
    assert catalog.calls == Counter()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    # the same proxy does count: one routed event reads the store
    action.act(_envelope("dataset", "operation", 0, b'{"timestampMillis": 0}'))
    assert sum(catalog.calls.values()) > 0


def test_an_envelope_rebuilt_from_json_is_still_routed(
    counted: tuple[ReflexAction, CountingCatalog],
) -> None:
    action, catalog = counted
    event = _envelope("dataset", "operation", 0, b'{"timestampMillis": 0}')
    action.act(EventEnvelope.from_json(event.as_json()))
    assert sum(catalog.calls.values()) > 0
