"""Uniqueness: a key (one field or a composite) identifies at most one row.

Catches duplicate rows from non-idempotent retries. A violation is each row beyond the first for
a duplicated key; rows whose key holds a NULL are not keys and never count as duplicates.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from reflex_actions.controls.base import FieldsControl, count_field
from reflex_actions.sql import CompiledQuery, Relation, indent, quote_identifier


class UniquenessControl(FieldsControl):
    type: Literal["uniqueness"] = "uniqueness"
    max_duplicate_count: int = count_field(default=0)

    violation_unit: ClassVar[str] = "duplicate rows"
    fields_are: ClassVar[str] = "a composite key"

    @property
    def key_fields(self) -> list[str]:
        return self.listed_fields

    def required_columns(self) -> list[str]:
        return self.key_fields

    def with_dataset_fields(self, mapping: dict[str, str]) -> UniquenessControl:
        spec = {**self.model_dump(exclude_none=True), **self.renamed_fields(mapping)}
        return UniquenessControl.model_validate(spec)

    def allowed_violations(self, rows_scanned: int) -> int:
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
