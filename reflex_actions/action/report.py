"""The `reflex` action's per-route report: what each route saw and what came of it.

It mirrors datahub-actions' ``ReportingAction``: the report is an ``ActionStageReport`` (its
totals are kept) with Reflex's counts per route. Each event a route reads has one outcome:
failed (the handler raised), refused (a human decision in it was refused), acted (the handler
asked the store to write at least one aspect) or ignored (it wrote nothing), so the four add up
to ``seen``. A delivery the pipeline retries is seen again.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub_actions.plugin.action.stats_util import ActionStageReport
from pydantic import BaseModel, Field, PrivateAttr

from reflex_actions.catalog.base import AspectT, Catalog, Written
from reflex_actions.catalog.models import DatasetContext, IncidentContext
from reflex_actions.wording import plural

logger = logging.getLogger(__name__)

#: how much of a refusal reason the report keeps (reasons may quote an error's message)
MAX_REASON = 120
_URN = re.compile(r"urn:li:\S*?(?=[.,;:]?(?:\s|$))")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")


def group_reason(reason: str) -> str:
    """The reason with its urns, quoted values and numbers masked, on one bounded line, so that
    the same refusal of different lessons or actors counts as one reason."""
    lines = reason.strip().splitlines()
    text = _URN.sub("<urn>", lines[0] if lines else "")
    text = _NUMBER.sub("<n>", _QUOTED.sub("<value>", text))
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


class RouteReport(BaseModel):
    """The events of one (entityType, aspectName) route."""

    seen: int = 0
    acted: int = 0
    ignored: int = 0
    refused: int = 0
    failed: int = 0
    #: grouped reason -> how many refusals gave it
    refusals: dict[str, int] = Field(default_factory=dict)
    #: error class name -> how many events failed with it
    errors: dict[str, int] = Field(default_factory=dict)

    def add(self, other: RouteReport) -> None:
        for outcome in ("seen", "acted", "ignored", "refused", "failed"):
            setattr(self, outcome, getattr(self, outcome) + getattr(other, outcome))
        self.refusals = dict(Counter(self.refusals) + Counter(other.refusals))
        self.errors = dict(Counter(self.errors) + Counter(other.errors))


class ReflexReport(ActionStageReport):
    """Per-route counts of one run of the action (or, summed with ``add``, of several)."""

    routes: dict[str, RouteReport] = Field(default_factory=dict)
    #: events no route reads (other entity types, aspects or event types), dropped unread
    dropped: int = 0
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @classmethod
    def for_routes(cls, routes: Sequence[str]) -> ReflexReport:
        """A report listing every route, those that saw nothing too."""
        return cls(routes={route: RouteReport() for route in routes})

    def record_dropped(self) -> None:
        with self._lock:
            self.dropped += 1

    def record(
        self,
        route: str,
        *,
        wrote: bool,
        refusals: Sequence[str] = (),
        error: BaseException | None = None,
    ) -> None:
        """One event the route read, and its outcome."""
        with self._lock:
            counts = self.routes.setdefault(route, RouteReport())
            counts.seen += 1
            self.total_assets_processed += 1
            if error is not None:
                counts.failed += 1
                name = type(error).__name__
                counts.errors[name] = counts.errors.get(name, 0) + 1
            elif refusals:
                counts.refused += 1
                for reason in map(group_reason, refusals):
                    counts.refusals[reason] = counts.refusals.get(reason, 0) + 1
            elif wrote:
                counts.acted += 1
                self.total_actions_executed += 1
            else:
                counts.ignored += 1

    def add(self, other: ReflexReport) -> None:
        """Count ``other``'s events in this report too (e.g. the runs of one demo)."""
        snapshot = ReflexReport.model_validate(other.as_obj())
        with self._lock:
            for route, counts in snapshot.routes.items():
                self.routes.setdefault(route, RouteReport()).add(counts)
            self.dropped += snapshot.dropped
            self.total_assets_processed += snapshot.total_assets_processed
            self.total_actions_executed += snapshot.total_actions_executed

    def as_obj(self) -> dict:
        """A JSON-able dict. (``ActionStageReport.as_obj`` of datahub-actions 1.7 recurses
        forever: ``Report.to_pure_python_obj`` calls ``as_obj`` back.)"""
        with self._lock:
            return self.model_dump(mode="json")

    def as_text(self) -> str:
        """A small table: one row per route, each refusal reason and error below its route."""
        with self._lock:
            routes = {route: counts.model_copy(deep=True) for route, counts in self.routes.items()}
            dropped = self.dropped
        seen = sum(counts.seen for counts in routes.values())
        width = max([len("route"), *(len(route) for route in routes)])
        columns = ("seen", "acted", "ignored", "refused", "failed")
        lines = [
            f"Reflex report: {plural(seen, 'event')} read on {plural(len(routes), 'route')}, "
            f"{dropped} dropped unread (no route)",
            "route".ljust(width) + "".join(f"  {column:>7}" for column in columns),
        ]
        for route, counts in routes.items():
            values = (getattr(counts, column) for column in columns)
            lines.append(route.ljust(width) + "".join(f"  {value:>7}" for value in values))
            lines += [f"  refused {n}x: {reason}" for reason, n in counts.refusals.items()]
            lines += [f"  failed {n}x: {error}" for error, n in counts.errors.items()]
        return "\n".join(lines)

    def log(self) -> None:
        """At WARNING, which ``datahub actions`` shows without --debug: its own end-of-run
        summary prints pipeline statistics only, never an action's report."""
        logger.warning("%s", self.as_text())


class WriteCountingCatalog(Catalog):
    """The catalog the handlers use, counting the writes they ask for: how the report tells an
    event that was acted on from one that changed nothing. A write the store finds unchanged
    still counts (the handler did decide to write)."""

    def __init__(self, inner: Catalog) -> None:
        self.inner = inner
        self.writes = 0

    def get_aspect(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        return self.inner.get_aspect(urn, aspect_class)

    def dataset(self, urn: str) -> DatasetContext | None:
        return self.inner.dataset(urn)

    def incident(self, urn: str) -> IncidentContext | None:
        return self.inner.incident(urn)

    def user_status(self, urn: str) -> str | None:
        return self.inner.user_status(urn)

    def aspect_writer(self, urn: str, aspect_class: type[AspectT]) -> str | None:
        return self.inner.aspect_writer(urn, aspect_class)

    def latest_timeseries(self, urn: str, aspect_class: type[AspectT]) -> AspectT | None:
        return self.inner.latest_timeseries(urn, aspect_class)

    def timeseries_written(
        self,
        urn: str,
        aspect_class: type[AspectT],
        *,
        limit: int,
        where: Mapping[str, str] | None = None,
    ) -> list[Written[AspectT]]:
        return self.inner.timeseries_written(urn, aspect_class, limit=limit, where=where)

    def downstreams(self, urn: str) -> list[str]:
        return self.inner.downstreams(urn)

    def datasets_by_domain(self, domain_urn: str) -> list[str]:
        return self.inner.datasets_by_domain(domain_urn)

    def datasets_by_platform(self, platform: str) -> list[str]:
        return self.inner.datasets_by_platform(platform)

    def datasets_by_field(self, field_name: str) -> list[str]:
        return self.inner.datasets_by_field(field_name)

    def datasets_by_owner(self, owner_urn: str) -> list[str]:
        return self.inner.datasets_by_owner(owner_urn)

    def terms_under(self, node_urn: str) -> list[str]:
        return self.inner.terms_under(node_urn)

    def emit(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
        self.writes += len(mcps)
        self.inner.emit(mcps)

    def one_decision(self) -> AbstractContextManager[None]:
        return self.inner.one_decision()

    def set_structured_properties(
        self, urn: str, values: Mapping[str, Sequence[str | float]], actor: str
    ) -> None:
        self.writes += 1
        self.inner.set_structured_properties(urn, values, actor)

    def add_owner(self, urn: str, owner: str, ownership_type: str, actor: str) -> None:
        self.writes += 1
        self.inner.add_owner(urn, owner, ownership_type, actor)

    def close(self) -> None:
        self.inner.close()
