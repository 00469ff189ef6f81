"""The schedule tick: the event that tells the action to judge what is due (stale data sends
no event of its own). The embedded source yields one when idle; beside Kafka, the action's own
timer makes them. A pipeline's ``event_type`` filter must let ``ReflexScheduleTick_v1`` pass."""

from __future__ import annotations

import json
from dataclasses import dataclass

from datahub_actions.event.event import Event
from datahub_actions.event.event_envelope import EventEnvelope

from reflex_actions.errors import ReflexError

SCHEDULE_TICK_EVENT_TYPE = "ReflexScheduleTick_v1"


@dataclass(frozen=True)
class ScheduleTick(Event):
    """A tick at ``time_ms`` (epoch ms): judge what is due as of then."""

    time_ms: int

    @classmethod
    def from_json(cls, json_str: str) -> ScheduleTick:
        try:
            value = json.loads(json_str)["time_ms"]
        except (ValueError, TypeError, KeyError):
            raise ReflexError("a schedule tick is JSON with an integer time_ms") from None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ReflexError("a schedule tick's time_ms is a non-negative integer")
        return cls(value)

    def as_json(self) -> str:
        return json.dumps({"time_ms": self.time_ms})


def tick_envelope(time_ms: int) -> EventEnvelope:
    return EventEnvelope(SCHEDULE_TICK_EVENT_TYPE, ScheduleTick(time_ms), {"tick": True})
