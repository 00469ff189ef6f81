"""The `reflex` action: a thin router from MetadataChangeLog events to Reflex's handlers."""

from __future__ import annotations

import logging
from collections.abc import Callable

from datahub_actions.action.action import Action
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import METADATA_CHANGE_LOG_EVENT_V1_TYPE
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.report import ReflexReport, WriteCountingCatalog
from reflex_actions.catalog.base import Catalog, CatalogError
from reflex_actions.catalog.registry import open_store
from reflex_actions.config import ReflexConfig
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.context import HandlerContext, decide_and_apply
from reflex_actions.handlers.gates import on_dataset_properties, on_lesson_properties
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.ownership import on_user_status
from reflex_actions.handlers.run_controls import on_operation
from reflex_actions.kinds import registered_kinds

logger = logging.getLogger(__name__)

Handler = Callable[[AspectChange, HandlerContext], None]

#: (entityType, aspectName) -> handler (DESIGN.md §3). Anything else is dropped unread.
ROUTES: dict[tuple[str, str], Handler] = {
    ("incident", "incidentInfo"): on_incident_change,
    ("glossaryTerm", "structuredProperties"): on_lesson_properties,
    ("dataset", "operation"): on_operation,
    ("corpuser", "corpUserStatus"): on_user_status,
    ("dataset", "structuredProperties"): on_dataset_properties,
}


class ReflexAction(Action):
    """Routes each event to its handler and counts, per route, what came of it (mirroring
    datahub-actions' ``ReportingAction``: ``get_report()``; the report is logged at close)."""

    def __init__(self, config: ReflexConfig, catalog: Catalog) -> None:
        self.writes = WriteCountingCatalog(catalog)
        self.context = HandlerContext(catalog=self.writes, config=config)
        self.report = ReflexReport.for_routes([route_name(*key) for key in ROUTES])
        self.report.start()

    @classmethod
    def create(cls, config_dict: dict, ctx: PipelineContext) -> ReflexAction:
        kinds = registered_kinds()  # a broken or conflicting kind stops the start, by name
        logger.info("reflex: lesson kinds %s", ", ".join(kind.pattern for kind in kinds))
        graph = ctx.graph.graph if ctx.graph is not None else None
        catalog, config = open_store(ReflexConfig.model_validate(config_dict or {}), graph)
        logger.info(
            "reflex: Reflex's own writes are recorded as %s",
            ", ".join([config.service_actor, *config.own_actors]),
        )
        return cls(config, catalog)

    def act(self, event: EventEnvelope) -> None:
        if event.event_type != METADATA_CHANGE_LOG_EVENT_V1_TYPE:
            self.report.record_dropped()
            return
        mcl = event.event
        key = (mcl.entityType, mcl.aspectName)  # type: ignore[attr-defined]
        handler = ROUTES.get(key)
        if handler is None:
            self.report.record_dropped()
            return
        route, writes_before = route_name(*key), self.writes.writes
        try:
            decide_and_apply(handler, AspectChange.from_mcl(mcl), self.context)  # type: ignore[arg-type]
        except CatalogError as error:
            self.report.record(route, wrote=False, error=error)
            raise  # the store is unreachable or broken: let the pipeline retry or dead-letter
        except ReflexError as error:
            self.report.record(route, wrote=False, error=error)
            logger.error(
                "skipped %s %s of %s: %s",
                mcl.entityType,  # type: ignore[attr-defined]
                mcl.aspectName,  # type: ignore[attr-defined]
                mcl.entityUrn,  # type: ignore[attr-defined]
                error,
            )
        else:
            wrote = self.writes.writes > writes_before
            self.report.record(route, wrote=wrote, refusals=self.context.refusals)

    def get_report(self) -> ReflexReport:
        """What each route saw so far (``ReportingAction.get_report``)."""
        return self.report

    def close(self) -> None:
        failed = any(counts.failed for counts in self.report.routes.values())
        self.report.end(success=not failed)
        self.report.log()
        self.context.catalog.close()


def route_name(entity_type: str, aspect_name: str) -> str:
    """How the report names a route: ``incident/incidentInfo``."""
    return f"{entity_type}/{aspect_name}"
