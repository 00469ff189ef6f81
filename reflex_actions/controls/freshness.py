"""The freshness control: the newest time in a field (or the recorded last update) is no older than
max_age as of the run; the control of the stale-data kind
(:mod:`reflex_actions.kinds.stale_data`, which drafts it).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import ValidationInfo, field_validator

from reflex_actions.controls import Control
from reflex_actions.controls.base import validate_column_name
from reflex_actions.errors import SnapshotNotFoundError, SnapshotUnreadableError
from reflex_actions.sql import SNAPSHOT, ControlQuery, Relation, column, count_where, exp, param
from reflex_actions.times import (
    TimeFormatError,
    format_duration,
    iso,
    parse_duration,
)

#: DuckDB types read natively as a time (any other type of ``timestamp_field`` is refused).
_TIMESTAMP_TYPES = re.compile(r"^(TIMESTAMP(_S|_MS|_NS)?|DATETIME|DATE)$")


_ZONED_TYPES = ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ")


_TEXT_TYPES = ("VARCHAR", "TEXT", "STRING")


#: A time written as text in ISO 8601 form, without and with a zone (no backslashes: some
#: dialects read them as escapes in string literals).
_PLAIN_TEXT = "^[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+)?)?)?$"


_ZONED_TEXT = _PLAIN_TEXT[:-1] + "(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"


def _type(name: str) -> exp.DataType:
    return exp.DataType.build(name)


def _since_epoch(time: exp.Expression, zoned: bool) -> exp.Expression:
    """Milliseconds from the epoch to ``time``: a zoned time from the zoned epoch (an instant
    whatever the session's zone), a plain one from the plain epoch (a time without a zone is
    UTC)."""
    epoch = "1970-01-01 00:00:00+00" if zoned else "1970-01-01 00:00:00"
    start = exp.cast(exp.Literal.string(epoch), "TIMESTAMPTZ" if zoned else "TIMESTAMP")
    return exp.DateDiff(this=time, expression=start, unit=exp.var("MILLISECOND"))


class FreshnessControl(Control):
    """The table is at most ``max_age`` old as of the time it is judged: by the newest value of
    ``timestamp_field``, or by the last update DataHub records when no field is given. A time
    more than ``future_tolerance`` after the time judged (an open end such as ``9999-12-31``,
    a clock far ahead) is not a load: it is ignored, and counted."""

    type: Literal["freshness"] = "freshness"
    max_age: str
    timestamp_field: str | None = None
    future_tolerance: str = "1h"

    violation_unit: ClassVar[str] = "stale tables"
    #: the judgement a run reports, pass or fail, in the order the counts row carries it
    _measures: ClassVar[tuple[str, ...]] = (
        "newest_ms", "as_of_ms", "age_seconds", "max_age_seconds", "future_values_ignored",
    )  # fmt: skip
    judged_as_of: ClassVar[bool] = True

    @field_validator("max_age", "future_tolerance", mode="before")
    @classmethod
    def _a_duration(cls, value: object, info: ValidationInfo) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{info.field_name} is a duration with a unit, e.g. 90m, 26h or 2d")
        try:
            parse_duration(value)
        except TimeFormatError as error:
            raise ValueError(str(error)) from None
        return value.strip().lower()

    @field_validator("timestamp_field")
    @classmethod
    def _check_field(cls, value: str | None) -> str | None:
        return None if value is None else validate_column_name(value)

    @property
    def max_age_seconds(self) -> int:
        return parse_duration(self.max_age)

    @property
    def future_tolerance_seconds(self) -> int:
        return parse_duration(self.future_tolerance)

    def required_columns(self) -> list[str]:
        return [self.timestamp_field] if self.timestamp_field else []

    def reads_data(self) -> bool:
        return self.timestamp_field is not None

    def judged_on_recorded(self) -> frozenset[str]:
        return frozenset() if self.timestamp_field else frozenset({"last_updated_ms"})

    def with_dataset_fields(self, mapping: dict[str, str]) -> FreshnessControl:
        if self.timestamp_field is None or self.timestamp_field not in mapping:
            return self
        return self.model_copy(update={"timestamp_field": mapping[self.timestamp_field]})

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """The newest time (epoch ms) not after the relation's time plus ``future_tolerance``,
        the times after it (ignored), and the age as of the relation's time, in the counts row
        (its measures, pass or fail); stale when older than ``max_age`` or when there is no
        such time at all. The time and the last update are bound at run time (the executor
        refuses a run without them).

        On a Parquet file a date or timestamp field is first judged by its newest value alone
        (``settled``: ``max`` of the column as it is stored, converted once, which DuckDB
        answers from the footer's statistics): when that value is not after the latest time
        kept, no value is ignored and it is the newest, so the counts row is that query's;
        only when it is after does ``counts`` convert and compare every row. Both give the
        same row: the conversion to epoch ms never decreases, so the newest value's is the
        newest of all."""
        params: dict[str, Any] = {
            "max_age_seconds": self.max_age_seconds,
            "future_tolerance_seconds": self.future_tolerance_seconds,
            **self.bound_from(relation),
        }
        as_of = exp.cast(param("as_of_ms"), "BIGINT")
        latest = as_of.copy() + exp.cast(param("future_tolerance_seconds"), "BIGINT") * 1000
        settled = None
        if self.timestamp_field is None:
            self._recorded_last_update(relation)  # refused when DataHub records none
            time: exp.Expression = exp.cast(param("last_updated_ms"), "BIGINT")
            newest = exp.Case().when(time <= latest, time.copy())
            ignored = exp.Case().when(time.copy() > latest.copy(), "1").else_("0")
            source: exp.Expression = exp.to_table(SNAPSHOT)
        else:
            time = exp.column("time_ms")
            newest = exp.func("max", exp.Case().when(time <= latest, time.copy()))
            ignored = count_where(time.copy() > latest.copy())
            timed = exp.select(self._epoch_ms(relation).as_("time_ms")).from_(SNAPSHOT)
            source = timed.subquery("timed")
            newest_stored = self._newest_stored_ms(relation)
            if newest_stored is not None:
                newest_ms = exp.column("newest_ms")
                kept = exp.or_(newest_ms.is_(exp.null()), newest_ms <= latest.copy())
                measured = self._measured(newest_stored, as_of, exp.Literal.number(0))
                settled = self._judged(measured.from_(SNAPSHOT), kept)
        counts = self._judged(self._measured(newest, as_of, ignored).from_(source))
        return ControlQuery(counts=counts, params=params, sample_is_measures=True, settled=settled)

    def _measured(
        self, newest: exp.Expression, as_of: exp.Expression, ignored: exp.Expression
    ) -> exp.Select:
        """The row count, the newest time kept, the time judged, the bound and the times
        ignored (from a source the caller gives)."""
        return exp.select(
            exp.cast(exp.func("count", exp.Star()), "BIGINT").as_("rows_scanned"),
            newest.as_("newest_ms"),
            as_of.copy().as_("as_of_ms"),
            exp.cast(param("max_age_seconds"), "BIGINT").as_("max_age_seconds"),
            exp.cast(ignored, "BIGINT").as_("future_values_ignored"),
        )

    def _judged(self, measured: exp.Select, where: exp.Expression | None = None) -> exp.Select:
        """The counts row of ``measured`` (only where ``where`` holds of it, when given): stale
        when there is no newest time or it is older than the bound."""
        if where is not None:
            measured = exp.select("*").from_(measured.subquery("stored")).where(where)
        newest_ms, as_of_ms, age = (
            exp.column(name) for name in ("newest_ms", "as_of_ms", "age_seconds")
        )
        judged = exp.select(
            "*", ((as_of_ms - newest_ms) / exp.Literal.number("1000.0")).as_("age_seconds")
        ).from_(measured.subquery("measured"))
        stale = exp.or_(newest_ms.is_(exp.null()), age > exp.column("max_age_seconds"))
        return exp.select(
            "rows_scanned",
            exp.Case().when(stale, "1").else_("0").as_("violation_count"),
            *self._measures,
        ).from_(judged.subquery("judged"))

    def _newest_stored_ms(self, relation: Relation) -> exp.Expression | None:
        """The field's newest value as stored (``max``, which a Parquet footer's statistics
        answer) converted to epoch ms once, for a date or timestamp field of a Parquet file;
        None elsewhere (text is converted row by row; a server table has no footer)."""
        assert self.timestamp_field is not None
        found = relation.types.get(self.timestamp_field)
        if not relation.row_count_is_free or relation.text_only or found is None:
            return None
        newest = exp.func("max", column(self.timestamp_field))
        if found in _ZONED_TYPES:
            return _since_epoch(newest, zoned=True)
        if _TIMESTAMP_TYPES.match(found):
            return _since_epoch(exp.cast(newest, "TIMESTAMP"), zoned=False)
        return None

    def bound_from(self, relation: Relation) -> dict[str, Any]:
        """The time it is judged as of, and (without ``timestamp_field``) the last update
        DataHub records."""
        bound: dict[str, Any] = {"as_of_ms": relation.as_of_ms}
        if self.timestamp_field is None:
            recorded = relation.recorded
            bound["last_updated_ms"] = recorded.last_updated_ms if recorded else None
        return bound

    def _recorded_last_update(self, relation: Relation) -> int | None:
        """The last update DataHub records (bound at run time where the query is shown)."""
        if relation.recorded is None:
            return None
        if relation.recorded.last_updated_ms is None:
            raise SnapshotNotFoundError(
                "DataHub records no update of this dataset (no operation aspect)"
            )
        return relation.recorded.last_updated_ms

    def _epoch_ms(self, relation: Relation) -> exp.Expression:
        """The field as epoch ms, by its type: natively for a date or timestamp; text (a CSV
        reads every column as text) in ISO 8601 form by whether it names a zone, a time
        without one being UTC; text in no such form is no time (NULL, never an error, in a
        dialect whose cast cannot fail softly); anything else is refused, naming its type."""
        assert self.timestamp_field is not None
        value = column(self.timestamp_field)
        found = relation.types.get(self.timestamp_field)
        if found in _ZONED_TYPES:
            return _since_epoch(value, zoned=True)
        if found is not None and _TIMESTAMP_TYPES.match(found):
            return _since_epoch(exp.cast(value, "TIMESTAMP"), zoned=False)
        if found is None or relation.text_only or found in _TEXT_TYPES:
            text = exp.Trim(this=exp.cast(value, "VARCHAR"))
            return (
                exp.Case()
                .when(
                    exp.RegexpLike(this=text, expression=exp.Literal.string(_ZONED_TEXT)),
                    _since_epoch(exp.TryCast(this=text.copy(), to=_type("TIMESTAMPTZ")), True),
                )
                .when(
                    exp.RegexpLike(this=text.copy(), expression=exp.Literal.string(_PLAIN_TEXT)),
                    _since_epoch(exp.TryCast(this=text.copy(), to=_type("TIMESTAMP")), False),
                )
            )
        raise SnapshotUnreadableError(
            f"timestamp_field {self.timestamp_field!r} is {found}, not a date or a timestamp"
        )

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        newest_ms, as_of_ms, age_seconds, max_age_seconds, future_values_ignored = row
        return {
            "newest": iso(newest_ms),
            "as_of": iso(as_of_ms),
            "age_seconds": None if age_seconds is None else round(float(age_seconds), 3),
            "max_age_seconds": max_age_seconds,
            "age": None if age_seconds is None else format_duration(float(age_seconds)),
            "future_values_ignored": int(future_values_ignored),
        }

    def describe(self) -> str:
        what = self.timestamp_field or "the dataset's last recorded update"
        return f"{what} is at most {self.max_age} old"
