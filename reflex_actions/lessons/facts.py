"""What the proposers may look at besides the incident's words: catalog and history facts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.lessons.model import IncidentText

#: an ISO date in an incident's words ("on 2026-09-14 the loader ...")
_DATE = re.compile(r"(?<![\d-])\d{4}-\d{2}-\d{2}(?![\d-])")


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

    def for_kind(self, pattern: str) -> IncidentFacts:
        """The facts as one kind's evidence reads them: another kind's labelled failures in
        the history are normal snapshots for it, as its backtest counts them."""
        if self.history is None:
            return self
        return replace(self, history=self.history.for_kind(pattern))


def dated_failures(history: History, text: IncidentText) -> list[str]:
    """The snapshots an incident's dates point at, when ``labels.yaml`` names none of its own:
    those whose id is, or begins with, a date the incident's words say (``2026-09-14``,
    ``2026-09-14T06``), and that no label names as another failure."""
    if any(label.incident == text.urn for label in history.labels.values()):
        return []
    dates = set(_DATE.findall(" ".join(text.fields().values())))
    return [
        point.snapshot_id
        for point in history.points  # a folder's snapshot files, or a table's partitions
        if point.snapshot_id[:10] in dates
        and not point.snapshot_id[10:11].isdigit()
        and point.snapshot_id not in history.labels
    ]
