"""The `reflex` action: a thin router from MetadataChangeLog events to Reflex's handlers, and
from schedule ticks (the embedded source's, or its own timer's beside Kafka) to the sweep of
the controls that are due."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from datahub_actions.action.action import Action
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.event.event_registry import METADATA_CHANGE_LOG_EVENT_V1_TYPE
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.report import ReflexReport, WriteCountingCatalog
from reflex_actions.action.shards import EveryDataset, KafkaShards, Shards
from reflex_actions.action.turns import Turns
from reflex_actions.bounded import validated
from reflex_actions.catalog.base import Catalog, CatalogError
from reflex_actions.catalog.registry import open_store
from reflex_actions.config import ReflexConfig
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.change import AspectChange, position_in
from reflex_actions.handlers.context import HandlerContext, decide_and_apply
from reflex_actions.handlers.gates import on_dataset_properties, on_lesson_properties
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.landing_runs import on_operation
from reflex_actions.handlers.ownership import on_user_status
from reflex_actions.handlers.recorded_runs import on_recorded_change
from reflex_actions.handlers.rollout import continue_rollouts
from reflex_actions.handlers.scheduled import on_schedule
from reflex_actions.registry import registered_kinds
from reflex_actions.source.schedule_tick import SCHEDULE_TICK_EVENT_TYPE, ScheduleTick
from reflex_actions.times import now_ms

logger = logging.getLogger(__name__)

Handler = Callable[[AspectChange, HandlerContext], None]

#: (entityType, aspectName) -> handler (DESIGN.md §3). Anything else is dropped unread.
ROUTES: dict[tuple[str, str], Handler] = {
    ("incident", "incidentInfo"): on_incident_change,
    ("glossaryTerm", "structuredProperties"): on_lesson_properties,
    ("dataset", "operation"): on_operation,
    ("dataset", "datasetProfile"): on_recorded_change,
    ("dataset", "schemaMetadata"): on_recorded_change,
    ("corpuser", "corpUserStatus"): on_user_status,
    ("dataset", "structuredProperties"): on_dataset_properties,
}
#: the worker's item asking it to carry the rollouts under way further
ROLLOUTS = "rollouts"
#: how the report names the schedule's sweeps
SCHEDULE_ROUTE = "schedule/tick"
#: DataHub's versioned change-log topic, when the kafka source's routes do not name it
DEFAULT_MCL_TOPIC = "MetadataChangeLog_Versioned_v1"
#: How often the timer looks whether a rebalance gave this instance datasets to sweep (a look
#: reads what the consumer's rebalance callbacks noted: it costs nothing).
REBALANCE_CHECK_MS = 1_000


class ReflexAction(Action):
    """Routes each event to its handler and counts, per route, what came of it (mirroring
    datahub-actions' ``ReportingAction``: ``get_report()``; the report is logged at close)."""

    def __init__(
        self,
        config: ReflexConfig,
        catalog: Catalog,
        *,
        timer: bool = False,
        actors_authenticated: bool = True,
        run_seal_key: bytes | None = None,
        shards: Shards | None = None,
    ) -> None:
        self.writes = WriteCountingCatalog(catalog)
        self.context = HandlerContext(
            catalog=self.writes,
            config=config,
            actors_authenticated=actors_authenticated,
            run_seal_key=run_seal_key,
        )
        self.report = ReflexReport.for_routes(
            [*(route_name(*key) for key in ROUTES), SCHEDULE_ROUTE]
        )
        self.report.start()
        #: one event or slice of a sweep at a time, events first
        self._turns = Turns()
        #: which datasets this instance sweeps (the group's members split them)
        self._shards: Shards = shards or EveryDataset()
        self._closing = threading.Event()
        #: the work waiting beside the events: a tick's sweep (the timer's, or the embedded
        #: source's), the rollouts under way (ROLLOUTS); None: stop
        self._work: queue.SimpleQueue[int | str | None] = queue.SimpleQueue()
        self._schedule = config.schedule.interval_seconds is not None
        self._worker = threading.Thread(target=self._work_on, name="reflex-work", daemon=True)
        self._worker.start()
        self._work.put(ROLLOUTS)  # a rollout a crash interrupted goes on
        self._timer: threading.Thread | None = None
        if timer:
            self._timer = threading.Thread(
                target=self._tick_on_slots, name="reflex-schedule", daemon=True
            )
            self._timer.start()

    @classmethod
    def create(cls, config_dict: dict, ctx: PipelineContext) -> ReflexAction:
        kinds = registered_kinds()  # a broken or conflicting kind stops the start, by name
        logger.info("reflex: lesson kinds %s", ", ".join(kind.pattern for kind in kinds))
        graph = ctx.graph.graph if ctx.graph is not None else None
        catalog, config = open_store(validated(ReflexConfig, config_dict, "action.config"), graph)
        logger.info(
            "reflex: Reflex's own writes are recorded as %s",
            ", ".join([config.service_actor, *config.own_actors]),
        )
        authenticated = catalog.authenticates_callers()
        if not authenticated:
            logger.warning(
                "reflex: DataHub does not authenticate its callers; %s",
                "human decisions are accepted on the actor it records, and every lesson page "
                "says they were not authenticated (trust_unauthenticated_actors)"
                if config.trust_unauthenticated_actors
                else "every human decision will be refused (set trust_unauthenticated_actors: "
                "true to accept them anyway)",
            )
        # Beside a source that yields schedule ticks (the embedded one) no timer is needed.
        timer = not getattr(ctx.event_source, "sends_schedule_ticks", False)
        return cls(
            config,
            catalog,
            timer=timer,
            actors_authenticated=authenticated,
            run_seal_key=catalog.run_seal_key(),
            shards=_shards_of(ctx.event_source),
        )

    def act(self, event: EventEnvelope) -> None:
        if event.event_type == SCHEDULE_TICK_EVENT_TYPE and isinstance(event.event, ScheduleTick):
            self.on_tick(event.event.time_ms)
            return
        if event.event_type != METADATA_CHANGE_LOG_EVENT_V1_TYPE:
            self.report.record_dropped()
            return
        with self._turns.event():
            self._route(event)

    def _route(self, event: EventEnvelope) -> None:
        mcl = event.event
        key = (mcl.entityType, mcl.aspectName)  # type: ignore[attr-defined]
        handler = ROUTES.get(key)
        if handler is None:
            self.report.record_dropped()
            return
        route, writes_before = route_name(*key), self.writes.writes
        try:
            change = AspectChange.from_mcl(
                mcl,  # type: ignore[arg-type]
                now_ms=self.context.clock(),
                position=position_in(event.meta),
                authenticated=self.context.actors_authenticated,
            )
            decide_and_apply(handler, change, self.context)
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
            if wrote and handler is on_lesson_properties:
                self._work.put(ROLLOUTS)  # an approval or retirement may have started one

    def on_tick(self, time_ms: int) -> None:
        """Ask for a sweep of the scheduled controls due at ``time_ms``: it runs beside the
        events, in slices (see Turns); without a schedule, nothing."""
        if not self._schedule:
            self.report.record_dropped()
            return
        self._work.put(time_ms)

    def _work_on(self) -> None:
        """The worker beside the events: the rollouts asked for, then one sweep per tick;
        work that piled up meanwhile is done once (ticks make one sweep, at the latest of
        them: an older tick's slot is judged by then or overtaken)."""
        stopping = False
        while not stopping:
            piled = [self._work.get()]
            while not self._work.empty():
                piled.append(self._work.get())
            if None in piled:
                stopping = True  # after this work
            if ROLLOUTS in piled:
                self._roll_out()
            ticks = [item for item in piled if isinstance(item, int)]
            if ticks:
                self._sweep(max(ticks))

    def _roll_out(self) -> None:
        try:
            continue_rollouts(self.context, self._turns.slice, self._shards.owned())
        except Exception as error:  # logged; the next approval, or the next start, goes on
            _log_failure(error, "a rollout")

    def _sweep(self, time_ms: int) -> None:
        interval = self.context.config.schedule.interval_seconds or 0
        wrote = False

        @contextmanager
        def turn() -> Iterator[None]:
            nonlocal wrote
            with self._turns.slice():
                before = self.writes.writes
                try:
                    yield
                finally:
                    wrote |= self.writes.writes > before

        try:
            owned = self._shards.owned()
            counts = on_schedule(self.context, time_ms, interval, turn, owned)
        except Exception as error:  # logged and reported; the next tick tries again
            self.report.record(SCHEDULE_ROUTE, wrote=wrote, error=error)
            _log_failure(error, f"schedule tick at {time_ms}")
            return
        self.report.record(SCHEDULE_ROUTE, wrote=wrote)
        logger.info("reflex: schedule tick at %s: %s", time_ms, counts)

    def _tick_on_slots(self) -> None:
        """The timer beside Kafka: with a schedule, one tick at the start (to catch up), then
        one at the start of each interval slot, until the action closes; and, when a
        rebalance gave this instance lessons or datasets (a member left, or it just joined),
        their rollouts and a sweep at once."""
        interval_ms = (self.context.config.schedule.interval_seconds or 0) * 1000
        next_slot = 0
        while not self._closing.is_set():
            now = now_ms()
            gained = self._shards.gained()
            if gained:
                self._work.put(ROLLOUTS)  # what a member that left was rolling out
            if self._schedule and (now >= next_slot or gained):
                self.on_tick(now)  # a member that left leaves its datasets to this one
                next_slot = now - now % interval_ms + interval_ms
            wait_ms = next_slot - now_ms() if self._schedule else REBALANCE_CHECK_MS
            self._closing.wait(min(wait_ms, REBALANCE_CHECK_MS) / 1000)

    def get_report(self) -> ReflexReport:
        """What each route saw so far (``ReportingAction.get_report``)."""
        return self.report

    def close(self) -> None:
        """Stop the timer, let the sweeper finish the sweeps asked for (what a sweep judged
        is not judged again, so an interrupted one resumes at the next tick), then report."""
        self._closing.set()
        if self._timer is not None:
            self._timer.join(timeout=30)
        self._work.put(None)
        self._worker.join()
        failed = any(counts.failed for counts in self.report.routes.values())
        self.report.end(success=not failed)
        self.report.log()
        self.context.catalog.close()


def _log_failure(error: Exception, what: str) -> None:
    """Work beside the events failed: bad input or an unreachable store in one line; a fault
    of Reflex's own with its trace. The worker goes on either way."""
    if isinstance(error, ReflexError):
        logger.error("reflex: %s failed: %s", what, error)
    else:
        logger.exception("reflex: %s failed", what)


def _shards_of(source: object) -> Shards:
    """Beside the kafka source, the datasets of the change-log partitions assigned to this
    member of the consumer group (told by its consumer, which subscribes once the pipeline
    runs); else (one instance) every dataset."""
    consumer = getattr(source, "consumer", None)
    routes = getattr(getattr(source, "source_config", None), "topic_routes", None) or {}
    if consumer is None or not hasattr(consumer, "subscribe"):
        return EveryDataset()
    shards = KafkaShards(routes.get("mcl", DEFAULT_MCL_TOPIC))
    shards.listen(consumer)
    return shards


def route_name(entity_type: str, aspect_name: str) -> str:
    """How the report names a route: ``incident/incidentInfo``."""
    return f"{entity_type}/{aspect_name}"
