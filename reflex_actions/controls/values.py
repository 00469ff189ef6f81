"""The value controls: a field that must hold listed values (``accepted_values``) or numbers
within a range (``value_range``), the controls of the invalid-values kind
(:mod:`reflex_actions.kinds.invalid_values`, which drafts them). Running one imports this module
alone, not the kind's drafting.

Both controls judge a row's value as its text (``CAST(... AS VARCHAR)``) reads, so a CSV snapshot
(read as text) and a Parquet one give the same counts: a range reads that text as a DOUBLE, and a
listed number matches a value that reads as the same number (``1`` matches ``1.00``). Where the
column's type says that text reads back as the column's own value, the column is compared
natively instead, the same answer without a cast per row (a range over 10M DOUBLEs: 1.2 s ->
85 ms): a DOUBLE (its text is the shortest that reads back exactly), and, for a range, an
integer or DECIMAL type that holds the bounds exactly. The text is read where the types differ
or are unknown: a text column (CSV), a FLOAT (its text ``0.1`` reads as another number than the
FLOAT widened to a DOUBLE), any type this module does not know, and a DOUBLE read where a filter
may miss a NaN (``Relation.filters_see_nans``: Spark on Parquet). A NULL is never an invalid
value: missing values are another incident class.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, Strict, StringConstraints, field_validator, model_validator

from reflex_actions.bounded import excerpt
from reflex_actions.controls.base import ColumnName, Control
from reflex_actions.sql import (
    SNAPSHOT,
    ControlQuery,
    Relation,
    column,
    exp,
    param,
    rows_and_violations,
)

#: Most values one ``accepted_values`` list may hold.
MAX_ACCEPTED_VALUES = 1000
#: Longest accepted text value (characters).
MAX_VALUE_CHARS = 1000
#: Largest magnitude of a number in a spec: values are compared as DOUBLE, exact up to 2**53.
MAX_NUMBER = 2**53
#: Values listed in a control's one-line description before "and N more".
DESCRIBED_VALUES = 10

Number = (
    Annotated[int, Strict(), Field(ge=-MAX_NUMBER, le=MAX_NUMBER)]
    | Annotated[float, Strict(), Field(ge=-MAX_NUMBER, le=MAX_NUMBER, allow_inf_nan=False)]
)
Text = Annotated[str, Strict(), StringConstraints(max_length=MAX_VALUE_CHARS)]

#: The floating type compared natively, where a filter sees every NaN.
DOUBLE = "DOUBLE"


@cache
def _built_type(name: str) -> exp.DataType:
    return exp.DataType.build(name, dialect="duckdb")


def _type(name: str) -> exp.DataType:
    """A new node of the type DuckDB calls ``name``, built once on first use: importing a kind
    imports no sqlglot (a run whose SQL was rendered before builds no tree)."""
    return _built_type(name).copy()


#: DuckDB's integer types and the values they hold.
INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
}
DECIMAL_TYPE = re.compile(r"DECIMAL\((\d{1,2}),(\d{1,2})\)")


def native_number_type(column_type: str | None, bounds: list[int | float]) -> str | None:
    """The engine type to compare a numeric column with these bounds in, when that gives the
    same answer as comparing DOUBLEs: a DOUBLE (every bound is one), or an integer or DECIMAL
    type holding every bound exactly. None otherwise: text, FLOAT, unknown types, a bound with
    more decimals than the column or beyond its range."""
    if column_type == DOUBLE:
        return DOUBLE
    exact = [
        Decimal(repr(bound)) if isinstance(bound, float) else Decimal(bound) for bound in bounds
    ]
    if column_type in INTEGER_RANGES:
        low, high = INTEGER_RANGES[column_type]
        fits = all(value == value.to_integral_value() and low <= value <= high for value in exact)
        return column_type if fits else None
    decimal = DECIMAL_TYPE.fullmatch(column_type or "")
    if decimal is None:
        return None
    precision, scale = int(decimal[1]), int(decimal[2])
    fits = all(
        value.as_tuple().exponent >= -scale and abs(value) < Decimal(10) ** (precision - scale)
        for value in exact
    )
    return f"DECIMAL({precision},{scale})" if fits else None


@dataclass(frozen=True)
class Value:
    """A row's value of the judged field as trees: the column itself, its text (what both
    controls compare, so a CSV snapshot read as text and a Parquet one count alike), and that
    text read as a number (NULL when it is not one)."""

    column: exp.Column
    text: exp.Expression
    number: exp.Expression

    @classmethod
    def of(cls, name: str, column_type: str | None) -> Value:
        """A DOUBLE column is its own number; an integer or DECIMAL one is cast to a number
        directly (the number its text reads as; such a cast cannot fail). Any other value's
        text is read as one softly (NULL when it is none), text columns and unknown types
        alike."""
        field = column(name)
        text = exp.Cast(this=field.copy(), to=_type("VARCHAR"))
        if column_type == DOUBLE:
            return cls(field, text, field.copy())
        if column_type in INTEGER_RANGES or DECIMAL_TYPE.fullmatch(column_type or ""):
            return cls(field, text, exp.Cast(this=field.copy(), to=_type(DOUBLE)))
        return cls(field, text, exp.TryCast(this=text.copy(), to=_type(DOUBLE), safe=True))


class FieldValuesControl(Control):
    """A control judging each non-NULL value of one field; a violation is a row whose value is
    not allowed, and the sample lists the offending values with their row counts, most first."""

    field: ColumnName

    violation_unit: ClassVar[str] = "rows with invalid values"

    @abstractmethod
    def offending(
        self, value: Value, column_type: str | None
    ) -> tuple[exp.Expression, dict[str, Any]]:
        """The condition on a non-NULL ``value`` that makes it invalid (on its text, it as a
        number, or the column itself when its engine type ``column_type`` allows the same
        judgement natively), and the values it binds."""

    def required_columns(self) -> list[str]:
        return [self.field]

    def with_dataset_fields(self, mapping: dict[str, str]) -> FieldValuesControl:
        renamed = {"field": mapping.get(self.field, self.field)}
        return type(self).model_validate({**self.model_dump(exclude_none=True), **renamed})

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """Counts: every row, and those whose non-NULL value is invalid. The sample, run only
        on failure, groups the invalid values by their text, most rows first (a wide column is
        never grouped whole). A DOUBLE read where a filter may miss a NaN (a NaN is above every
        number: outside any range with a maximum, and in no list) is judged as a value of an
        unknown type, by its text, which no statistics prune by."""
        column_type = relation.types.get(self.field)
        if column_type == DOUBLE and not relation.filters_see_nans:
            column_type = None
        value = Value.of(self.field, column_type)
        condition, params = self.offending(value, column_type)
        invalid = exp.and_(value.column.is_(exp.null()).not_(), exp.paren(condition))
        occurrences = exp.func("count", exp.Star())
        sample = (
            exp.select(value.text.as_("value"), occurrences.as_("occurrences"))
            .from_(SNAPSHOT)
            .where(invalid.copy())
            .group_by(value.text.copy())
            .order_by(
                exp.Ordered(this=exp.column("occurrences"), desc=True),
                exp.Ordered(this=exp.column("value")),
            )
            .limit(sample_size)
        )
        if relation.row_count_is_free and sample_size > 0:
            # one scan of the invalid rows, counting and grouping them: the rows are counted
            # by the footer, and the sample's groups add up to the violation count
            total = exp.Window(this=exp.func("sum", occurrences.copy()))
            return ControlQuery(
                counts=exp.select(exp.func("count", exp.Star()).as_("rows_scanned")).from_(
                    SNAPSHOT
                ),
                sample=sample.select(total.as_("violation_count")),
                params=params,
                sample_totals=True,
            )
        return ControlQuery(
            counts=rows_and_violations(invalid, relation), sample=sample, params=params
        )

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        value, occurrences = row
        return {"value": value, "occurrences": occurrences}


class AcceptedValuesControl(FieldValuesControl):
    """Every non-NULL value of ``field`` is one of ``values`` (texts compare exactly, numbers
    by value)."""

    type: Literal["accepted_values"] = "accepted_values"
    values: list[Text | Number] = Field(min_length=1, max_length=MAX_ACCEPTED_VALUES)

    @field_validator("values")
    @classmethod
    def _no_value_twice(cls, values: list[str | float]) -> list[str | float]:
        seen: set[tuple[bool, str | float]] = set()
        for value in values:
            key = (isinstance(value, str), value)  # 1 and 1.0 are one number; "1" is text
            if key in seen:
                raise ValueError(f"values lists {excerpt(value)} twice")
            seen.add(key)
        return values

    def offending(
        self, value: Value, column_type: str | None
    ) -> tuple[exp.Expression, dict[str, Any]]:
        """Neither a listed text nor a listed number: an ``IN`` list of one placeholder per
        value (a value that is no number is in no list of numbers)."""
        texts = [listed for listed in self.values if isinstance(listed, str)]
        numbers = [float(listed) for listed in self.values if not isinstance(listed, str)]
        params = {f"accepted_{i}": listed for i, listed in enumerate([*texts, *numbers])}
        placeholders = [param(name) for name in params]
        accepted: list[exp.Expression] = []
        if texts:
            listed = placeholders[: len(texts)]
            accepted.append(exp.In(this=value.text.copy(), expressions=listed))
        if numbers:
            among = exp.In(this=value.number.copy(), expressions=placeholders[len(texts) :])
            accepted.append(exp.func("coalesce", among, exp.false()))
        return exp.or_(*accepted).not_(), params

    def describe(self) -> str:
        shown = ", ".join(str(value) for value in self.values[:DESCRIBED_VALUES])
        more = len(self.values) - DESCRIBED_VALUES
        return f"{self.field} is one of {shown}" + (f" and {more} more" if more > 0 else "")


class ValueRangeControl(FieldValuesControl):
    """Every non-NULL value of ``field`` is a number within [``min``, ``max``] (inclusive; a
    value that is not a number is outside any range)."""

    type: Literal["value_range"] = "value_range"
    min: Number | None = None
    max: Number | None = None

    @model_validator(mode="after")
    def _a_bound_in_order(self) -> ValueRangeControl:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def offending(
        self, value: Value, column_type: str | None
    ) -> tuple[exp.Expression, dict[str, Any]]:
        """On a DOUBLE column, or an integer or DECIMAL one whose type holds both bounds
        exactly, the column is compared in its own type (no per-row cast: the filter reaches the
        scan, as a hand-written one does); otherwise the value read as a DOUBLE is, and one
        that is no number is outside."""
        bounds = {
            name: bound
            for name, bound in (("min", self.min), ("max", self.max))
            if bound is not None
        }
        params = {name: float(bound) for name, bound in bounds.items()}
        native = native_number_type(column_type, list(bounds.values()))
        if native is not None:
            outside = [
                (exp.LT if name == "min" else exp.GT)(
                    this=value.column.copy(),
                    expression=exp.Cast(this=param(name), to=_type(native)),
                )
                for name in params
            ]
            return exp.or_(*outside), params
        within = [
            (exp.GTE if name == "min" else exp.LTE)(
                this=value.number.copy(), expression=param(name)
            )
            for name in params
        ]
        return exp.func("coalesce", exp.and_(*within), exp.false()).not_(), params

    def describe(self) -> str:
        if self.max is None:
            return f"{self.field} is a number of at least {self.min}"
        if self.min is None:
            return f"{self.field} is a number of at most {self.max}"
        return f"{self.field} is a number from {self.min} to {self.max}"
