"""The not_null control: the listed field(s) hold a value in every row (or in all but an allowed
fraction); the control of the missing-values kind (:mod:`reflex_actions.kinds.missing_values`,
which drafts it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from reflex_actions.controls.base import MAX_LIST_ITEMS, FieldsControl, column_list
from reflex_actions.sql import (
    SNAPSHOT,
    ControlQuery,
    Relation,
    column,
    count_where,
    exp,
    param,
    rows_and_violations,
)

#: Most columns of a relation a sampled row is shown with when no key column names it.
MAX_ROW_COLUMNS = 3


#: The column types (DuckDB's names, in which every engine describes a relation) whose values
#: tell one row from another: integers, decimals, text, UUIDs, dates and times; not floats,
#: booleans, binary or nested values.
IDENTIFYING_TYPE = re.compile(
    r"U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|DECIMAL(\(\d+,\d+\))?|VARCHAR|UUID|DATE|"
    r"TIME(STAMP(_S|_MS|_NS)?)?( WITH TIME ZONE)?",
    re.IGNORECASE,
)


class NotNullControl(FieldsControl):
    """The listed field(s) hold a value in every row, or in all but ``max_null_fraction`` of them.

    A violation is a row where a listed field IS NULL; the snapshot passes while there are at
    most ``floor(max_null_fraction * rows)`` of them (none by default).
    """

    type: Literal["not_null"] = "not_null"
    #: the columns whose values identify a sampled row (default: the checked fields; a checked
    #: field, NULL in the rows sampled, is never shown as their key)
    key: list[str] | None = Field(default=None, min_length=1, max_length=MAX_LIST_ITEMS)
    max_null_fraction: float = Field(default=0.0, ge=0.0, le=1.0, strict=True)

    violation_unit: ClassVar[str] = "rows with a NULL"

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: list[str] | None) -> list[str] | None:
        return column_list(value, "key")

    @property
    def checked_fields(self) -> list[str]:
        return self.listed_fields

    @property
    def sample_key(self) -> list[str]:
        return list(self.key) if self.key is not None else self.checked_fields

    @property
    def identifying_key(self) -> list[str]:
        """The key columns that tell the sampled rows apart: the checked fields are NULL in
        them (in every one, with one field checked)."""
        return [name for name in self.sample_key if name not in self.checked_fields]

    def row_columns(self, relation: Relation) -> list[str]:
        """What a sampled row is shown with when no key column identifies it: the relation's
        first few other columns of an identifying type, else (its columns unknown, or none
        such) the checked fields."""
        others = [
            name
            for name, kind in relation.types.items()
            if name not in self.checked_fields and IDENTIFYING_TYPE.fullmatch(kind)
        ]
        return others[:MAX_ROW_COLUMNS] or self.checked_fields

    def required_columns(self) -> list[str]:
        return list(dict.fromkeys([*self.checked_fields, *self.sample_key]))

    def with_dataset_fields(self, mapping: dict[str, str]) -> NotNullControl:
        spec: dict[str, Any] = {
            **self.model_dump(exclude_none=True),
            **self.renamed_fields(mapping),
        }
        if self.key is not None:
            spec["key"] = [mapping.get(name, name) for name in self.key]
        return NotNullControl.model_validate(spec)

    def allowed_violations(self, rows_scanned: int) -> int:
        # as the decimal the steward wrote: 0.29 of 100 rows allows 29, not 28.999...
        return int(Decimal(str(self.max_null_fraction)) * rows_scanned)

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """Counts: every row, and those with a NULL. The sample, run only on failure, is the first
        rows with a NULL by key (then by which fields are NULL: a limit reads only those),
        each beside every checked field's NULL count (one more pass over the NULL rows, unless
        one field is checked: its NULL count is the violation count).

        A key of only checked fields (the default) tells no NULL row from another: the rows are
        shown with a few other columns instead (:meth:`row_columns`), their names bound and
        selected beside their values (they depend on the relation, which ``sample_row`` does
        not see), and sorted by them as by a key.

        One field checked, its NULL rows hold it NULL and its flag true in every row: the sample
        sorts by the other columns shown only (none: any rows are the same rows), so a server
        stops at the limit instead of sorting every NULL row."""
        nulls = [column(name).is_(exp.null()) for name in self.checked_fields]
        any_null = exp.or_(*nulls)
        counts = rows_and_violations(any_null, relation)
        key = self.identifying_key
        if key:
            named: dict[str, str] = {}
        else:
            key = self.row_columns(relation)
            named = {f"name_{i}": name for i, name in enumerate(key)}
        # positional names: a key may be named like anything this query would call a column
        keys = {f"key_{i}": column(name) for i, name in enumerate(key)}
        shown: dict[str, exp.Expression] = {
            **{alias: exp.cast(param(alias), "VARCHAR") for alias in named},
            **keys,
            **{f"null_{i}": null for i, null in enumerate(nulls)},
        }
        first = (
            exp.select(*(value.copy().as_(name) for name, value in shown.items()))
            .from_(SNAPSHOT)
            .where(any_null.copy())
            .limit(sample_size)
        )
        if len(nulls) == 1:  # its NULL rows are the violations: the counts hold their number
            varying = [column(name) for name in key if name != self.checked_fields[0]]
            sample = first.order_by(*_first(varying)) if varying else first
            return ControlQuery(counts=counts, sample=sample, params=named, sample_counted=True)
        first = first.order_by(*_first([*keys.values(), *nulls]))
        counted = {f"count_{i}": null for i, null in enumerate(nulls)}
        null_counts = (
            exp.select(*(count_where(null.copy()).as_(name) for name, null in counted.items()))
            .from_(SNAPSHOT)
            .where(any_null.copy())
        )
        picked = [exp.column(name, "first_nulls") for name in shown]
        sample = (
            exp.select(*picked, *(exp.column(name, "null_counts") for name in counted))
            .from_(first.subquery("first_nulls"))
            .join(null_counts.subquery("null_counts"), join_type="cross")
            .order_by(*_first(picked[len(named) :]))
        )
        return ControlQuery(counts=counts, sample=sample, params=named)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """The row's key values (``key``), or, with no key column to tell the rows apart, the
        columns it was shown with (``row``, their names read from the row), and its NULLs."""
        checked = len(self.checked_fields)
        if self.identifying_key:
            shown, names = "key", self.identifying_key
        else:  # the names come first, then their values, the NULL flags and the NULL counts
            shown, names = "row", list(row[: (len(row) - 2 * checked) // 2])
            row = row[len(names) :]
        values, is_null, null_counts = row[: len(names)], row[len(names) : -checked], row[-checked:]
        return {
            shown: dict(zip(names, values, strict=True)),
            "null_fields": [
                name for name, null in zip(self.checked_fields, is_null, strict=True) if null
            ],
            "null_counts": dict(zip(self.checked_fields, null_counts, strict=True)),
        }

    def describe(self) -> str:
        listed = ", ".join(self.checked_fields)
        if self.max_null_fraction:
            return f"({listed}) is NULL in at most {self.max_null_fraction:.2%} of rows"
        return f"({listed}) is never NULL"


def _first(values: Iterable[exp.Expression]) -> list[exp.Ordered]:
    """Ascending, NULLs last, in every dialect (each one's default differs)."""
    return [exp.Ordered(this=value.copy(), nulls_first=False) for value in values]
