"""Uniqueness: a key (one field or a composite) identifies at most one row.

Catches duplicate rows from non-idempotent retries. A violation is each row beyond the first for
a duplicated key; rows whose key holds a NULL are not keys and never count as duplicates.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from reflex_actions.bounded import excerpt
from reflex_actions.controls.base import (
    MAX_LIST_ITEMS,
    Control,
    count_field,
    validate_column_name,
)
from reflex_actions.sql import CompiledQuery, Relation, indent, quote_identifier


class UniquenessControl(Control):
    type: Literal["uniqueness"] = "uniqueness"
    field: str | None = None
    fields: list[str] | None = Field(default=None, min_length=1, max_length=MAX_LIST_ITEMS)
    max_duplicate_count: int = count_field(default=0)

    violation_unit: ClassVar[str] = "duplicate rows"

    @field_validator("field")
    @classmethod
    def _check_field(cls, value: str | None) -> str | None:
        return None if value is None else validate_column_name(value)

    @field_validator("fields")
    @classmethod
    def _check_fields(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for name in value:
            validate_column_name(name)
        if len(set(value)) != len(value):
            twice = next(name for name in value if value.count(name) > 1)
            raise ValueError(f"fields lists the column {excerpt(twice)} twice")
        return value

    @model_validator(mode="after")
    def _exactly_one_key(self) -> UniquenessControl:
        if (self.field is None) == (self.fields is None):
            raise ValueError("give exactly one of 'field' (a column) or 'fields' (a composite key)")
        return self

    @property
    def key_fields(self) -> list[str]:
        return [self.field] if self.field is not None else list(self.fields or [])

    def required_columns(self) -> list[str]:
        return self.key_fields

    def with_dataset_fields(self, mapping: dict[str, str]) -> UniquenessControl:
        renamed = [mapping.get(name, name) for name in self.key_fields]
        key = {"field": renamed[0]} if self.field is not None else {"fields": renamed}
        return UniquenessControl.model_validate({**self.model_dump(exclude_none=True), **key})

    def allowed_violations(self) -> int:
        return self.max_duplicate_count

    def compile(self, relation: Relation, sample_size: int = 5) -> CompiledQuery:
        keys = [quote_identifier(name) for name in self.key_fields]
        key_list = ", ".join(keys)
        grouped = relation.partition_select() + key_list
        duplicated = " AND ".join(["occurrences > 1", *(f"{key} IS NOT NULL" for key in keys)])
        sql = f"""WITH snapshot AS (
{indent(relation.sql)}
),
key_counts AS (
    SELECT {grouped}, count(*) AS occurrences
    FROM snapshot
    GROUP BY {grouped}
)
SELECT
    {relation.partition_select()}coalesce(sum(occurrences), 0)::BIGINT AS rows_scanned,
    coalesce(sum(occurrences - 1) FILTER (WHERE {duplicated}), 0)::BIGINT AS violation_count,
    arg_max(row({key_list}, occurrences), row(occurrences, {key_list}), $sample_size)
        FILTER (WHERE {duplicated}) AS sample
FROM key_counts{relation.partition_suffix()}"""
        return CompiledQuery(sql=sql, params={**relation.params, "sample_size": sample_size})

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        *key_values, occurrences = row
        key = dict(zip(self.key_fields, key_values, strict=True))
        return {"key": key, "occurrences": occurrences}

    def describe(self) -> str:
        key = ", ".join(self.key_fields)
        rule = f"({key}) identifies at most one row"
        if self.max_duplicate_count:
            return f"{rule}, {self.max_duplicate_count} duplicate(s) allowed"
        return rule
