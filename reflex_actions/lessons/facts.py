"""What the proposers may look at besides the incident's words: catalog and history facts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import DatasetContext


class FactReader(Protocol):
    """The catalog reads lesson drafting needs."""

    def dataset(self, urn: str) -> DatasetContext | None: ...
    def user_status(self, urn: str) -> str | None: ...
    def datasets_by_field(self, field_name: str) -> list[str]: ...


#: dataset urn -> its history, or None when it has none
HistoryLookup = Callable[[str], History | None]


@dataclass
class IncidentFacts:
    """The affected dataset's context and history, gathered once for every proposer."""

    source: DatasetContext | None
    history: History | None
    catalog: FactReader
    histories: HistoryLookup = field(default=lambda urn: None)
