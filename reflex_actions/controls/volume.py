"""The volume control: a table's row count within absolute bounds and no more than max_drop below
the median of its recent counts; the control of the missing-rows kind
(:mod:`reflex_actions.kinds.missing_rows`, which drafts it).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from reflex_actions.controls import Control
from reflex_actions.controls.base import MAX_COUNT, count_field
from reflex_actions.errors import SnapshotNotFoundError
from reflex_actions.sql import SNAPSHOT, ControlQuery, Relation, exp, param

#: Most earlier counts a relative rule may look back over.
MAX_WINDOW = 365


class VolumeControl(Control):
    """A snapshot's row count lies within the bounds: ``min_rows`` / ``max_rows`` and, with
    ``max_drop``, at most that share below the median of the previous ``window`` counts."""

    type: Literal["volume"] = "volume"
    min_rows: int | None = Field(default=None, ge=0, le=MAX_COUNT, strict=True)
    max_rows: int | None = Field(default=None, ge=0, le=MAX_COUNT, strict=True)
    max_drop: float | None = Field(default=None, gt=0.0, lt=1.0, strict=True)
    window: int = count_field(default=7, ge=1, le=MAX_WINDOW)

    violation_unit: ClassVar[str] = "rows short of (or beyond) the bounds"
    #: the judgement a run reports, pass or fail, in the order the counts row carries it
    _measures: ClassVar[tuple[str, ...]] = (
        "row_count", "baseline_median", "lower_bound", "upper_bound", "rule",
    )  # fmt: skip

    @model_validator(mode="after")
    def _a_bound_in_order(self) -> VolumeControl:
        if self.min_rows is None and self.max_rows is None and self.max_drop is None:
            raise ValueError("give 'min_rows', 'max_rows' or 'max_drop'")
        if (
            self.min_rows is not None
            and self.max_rows is not None
            and (self.min_rows > self.max_rows)
        ):
            raise ValueError(f"min_rows {self.min_rows} is greater than max_rows {self.max_rows}")
        return self

    def required_columns(self) -> list[str]:
        return []  # it counts rows, whatever their columns

    def judged_on_recorded(self) -> frozenset[str]:
        return frozenset({"row_count"})  # a profile's rowCount: no data read

    def earlier_counts_needed(self) -> int:
        return self.window if self.max_drop is not None else 0

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def bounds(self, earlier: tuple[int, ...]) -> tuple[int | None, int | None, float | None, str]:
        """(lower bound, upper bound, the earlier counts' median, the rule that set them)."""
        lower, rule = self.min_rows, "absolute bounds"
        median = float(statistics.median(earlier)) if earlier else None
        if self.max_drop is not None and median is not None:
            relative = math.ceil(round(median * (1 - self.max_drop), 6))
            lower = relative if lower is None else max(lower, relative)
            rule = (
                f"at most {self.max_drop:.0%} below the median of the {len(earlier)} earlier "
                "counts" + (" and the absolute bounds" if self.min_rows is not None else "")
            )
        elif self.max_drop is not None:
            rule = "absolute bounds only: no earlier counts to judge the drop against"
        return lower, self.max_rows, median, rule

    def bound_from(self, relation: Relation) -> dict[str, Any]:
        """The bounds from the spec and the earlier counts, and the count the profile
        records."""
        lower, upper, median, rule = self.bounds(relation.earlier_counts)
        bound: dict[str, Any] = {
            "lower_bound": lower,
            "upper_bound": upper,
            "baseline_median": median,
            "rule": rule,
        }
        if relation.recorded is not None:
            bound["recorded_row_count"] = relation.recorded.row_count
        elif relation.footer_rows is not None:
            bound["footer_rows"] = relation.footer_rows
        return bound

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """One count (the snapshot's; the one its profile records, or its footer's when the
        engine read it ahead, bound: no data read); the bounds are computed from the spec and
        the earlier counts, and bound. The counts row carries the judgement as its measures
        (the count, the earlier counts' median, the bounds and the rule that set them): a
        failing run's sample."""
        params = self.bound_from(relation)
        if relation.recorded is not None:  # the profile's count: no data read
            if relation.recorded.row_count is None:
                raise SnapshotNotFoundError(
                    "DataHub records no row count (datasetProfile.rowCount) for this dataset"
                )
            row_count: exp.Expression = param("recorded_row_count")
        elif relation.footer_rows is not None:  # the footer's count, as a scan counts rows
            row_count = param("footer_rows")
        else:
            row_count = exp.func("count", exp.Star())
        counted = exp.select(
            exp.cast(row_count, "BIGINT").as_("row_count"),
            exp.cast(param("baseline_median"), "DOUBLE").as_("baseline_median"),
            exp.cast(param("lower_bound"), "BIGINT").as_("lower_bound"),
            exp.cast(param("upper_bound"), "BIGINT").as_("upper_bound"),
            exp.cast(param("rule"), "VARCHAR").as_("rule"),
        )
        if relation.recorded is None and relation.footer_rows is None:
            counted = counted.from_(SNAPSHOT)
        count, lower_bound, upper_bound = (
            exp.column(name) for name in ("row_count", "lower_bound", "upper_bound")
        )
        # a NULL bound compares to nothing: no row is short of (or beyond) it
        short = exp.Case().when(count < lower_bound, lower_bound - count).else_("0")
        beyond = exp.Case().when(count > upper_bound, count - upper_bound).else_("0")
        counts = exp.select(
            count.as_("rows_scanned"),
            (short + beyond).as_("violation_count"),
            *(exp.column(name) for name in self._measures),
        ).from_(counted.subquery("counted"))
        return ControlQuery(counts=counts, params=params, sample_is_measures=True)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(self._measures, row, strict=True))

    def describe(self) -> str:
        parts = []
        if self.min_rows is not None:
            parts.append(f"at least {self.min_rows} rows")
        if self.max_rows is not None:
            parts.append(f"at most {self.max_rows} rows")
        if self.max_drop is not None:
            parts.append(
                f"at most {self.max_drop:.0%} below the median of the last {self.window} loads"
            )
        return "a load holds " + ", ".join(parts)
