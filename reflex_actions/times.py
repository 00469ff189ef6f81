"""Durations and instants as people write them: ``26h``, ``90m``, ``2d``; ISO 8601 times.

Times are epoch milliseconds, as DataHub stores them. A time written without a zone is UTC
(a snapshot id, ``--as-of``, a ``snapshot_times`` entry), so a backtest reads the same on every
machine whatever its local zone.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime, timedelta

from reflex_actions.bounded import excerpt
from reflex_actions.errors import ReflexError

logger = logging.getLogger(__name__)

#: seconds per duration unit
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: Longest duration accepted: ten years (beyond any sensible staleness bound).
MAX_DURATION_SECONDS = 3650 * 86400
_DURATION = re.compile(r"(?:(\d{1,7})([smhdw]))+")
_PART = re.compile(r"(\d{1,7})([smhdw])")
#: A date-time id written filename-safe: ``2026-09-14T06-30`` (``:`` is not allowed in names).
_FILENAME_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[T_ ](\d{2})-(\d{2})(?:-(\d{2}))?(.*)$")
#: Longest time text read (ISO 8601 with nanoseconds and a zone is under 40 characters).
MAX_TIME_CHARS = 64


class TimeFormatError(ReflexError, ValueError):
    """A duration or a time that cannot be read; the message names it."""


def parse_duration(text: str) -> int:
    """``26h`` -> 93600 seconds; ``1d12h``, ``90m``, ``2w`` too. Units s, m, h, d, w; a bare
    number is refused (is ``26`` hours or seconds?)."""
    value = text.strip().lower() if isinstance(text, str) else ""
    if not _DURATION.fullmatch(value):
        raise TimeFormatError(
            f"{excerpt(str(text))} is not a duration: write a number and a unit "
            "(s, m, h, d, w), e.g. 90m, 26h, 2d or 1d12h"
        )
    seconds = sum(int(n) * UNIT_SECONDS[unit] for n, unit in _PART.findall(value))
    if not 0 < seconds <= MAX_DURATION_SECONDS:
        raise TimeFormatError(f"duration {value} must be above 0 and at most 3650d")
    return seconds


def format_duration(seconds: float) -> str:
    """93600 -> ``1d2h``: the largest units, to the minute (seconds below a minute)."""
    whole = round(seconds)
    if abs(whole) < 60:
        return f"{whole}s"
    sign, whole = ("-" if whole < 0 else ""), abs(whole) // 60 * 60
    parts = []
    for unit in ("d", "h", "m"):
        count, whole = divmod(whole, UNIT_SECONDS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return sign + "".join(parts)


def parse_instant(text: str, *, date_is_end_of_day: bool = False) -> int:
    """An ISO 8601 date or date-time as epoch ms; no zone means UTC. A date alone is its
    midnight, or with ``date_is_end_of_day`` the next midnight (a daily snapshot named by its
    day holds that day's data). Filename-safe times (``2026-09-14T06-30``) are read too."""
    value = text.strip() if isinstance(text, str) else ""
    if not value or len(value) > MAX_TIME_CHARS:
        raise TimeFormatError(f"{excerpt(str(text))} is not an ISO 8601 time")
    if filename_safe := _FILENAME_TIME.match(value):
        day, hour, minute, second, rest = filename_safe.groups()
        value = f"{day}T{hour}:{minute}:{second or '00'}{rest}"
    try:
        if len(value) in (8, 10) and "T" not in value:
            day_start = datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
            return to_ms(day_start + (timedelta(days=1) if date_is_end_of_day else timedelta()))
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise TimeFormatError(
            f"{excerpt(text)} is not an ISO 8601 time (e.g. 2026-09-14 or 2026-09-14T06:00Z)"
        ) from None
    return to_ms(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def to_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    """Epoch ms as an ISO 8601 UTC time, to the second (None stays None)."""
    if ms is None:
        return None
    return (
        datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def now_ms() -> int:
    return to_ms(datetime.now(UTC))


#: How far ahead of Reflex's clock a writer's time may be before it is taken as "now": a
#: loader's or a steward's clock a little fast is common; a time in 2100 is a skewed or forged
#: stamp, and believing it would make every later event look older (DESIGN §9).
FUTURE_TOLERANCE_MS = 5 * 60_000


def believed_time(time_ms: int, now: int, what: str) -> int:
    """The time Reflex believes for a writer's ``time_ms``: itself, unless it is more than
    :data:`FUTURE_TOLERANCE_MS` ahead of Reflex's own clock ``now``, when it is ``now`` (and
    logged, naming ``what`` carried it)."""
    if time_ms <= now + FUTURE_TOLERANCE_MS:
        return time_ms
    logger.warning("%s is stamped %s, ahead of Reflex's clock: taken as now", what, iso(time_ms))
    return now
