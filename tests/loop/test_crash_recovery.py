"""A failure between the steps of one event never loses incident B on the retry."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from reflex_actions.catalog.base import CatalogError
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.demo.run import Demo
from tests.conftest import write_snapshot
from tests.loop.store import incidents_b, land, store_of
from tests.loop.test_landing import DUPLICATED, LEDGER, _landing


def test_incident_write_failing_once_is_raised_on_the_retry(
    published: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = write_snapshot(_landing(published) / "retry.parquet", DUPLICATED)
    emit = LiteCatalog.emit
    failures = []

    def flaky_emit(self: LiteCatalog, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        if not failures and any(m.aspectName == "incidentInfo" for m in mcps):
            failures.append(mcps[0].entityUrn)
            raise CatalogError("the store went away for a moment")
        emit(self, mcps)

    monkeypatch.setattr(LiteCatalog, "emit", flaky_emit)
    published.config["options"]["retry_count"] = 1  # the pipeline redelivers a failed event
    land(published, LEDGER, snapshot, "retry")
    published.react()

    assert failures, "the incident write was never attempted"
    raised = incidents_b(store_of(published.workdir), LEDGER)
    assert failures[0] in raised
