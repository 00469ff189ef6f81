"""Active ownership: every dataset keeps enough active owners of the required types.

Catches orphaned ownership after an employee leaves. It runs over an ownership snapshot: one row
per dataset-owner edge (a dataset with no owner at all appears once with a NULL owner). An owner
whose status is unknown (no ``corpUserStatus``, common for ingested users: a NULL or empty
status) is neither active nor departed: it is not counted as gone, and results report it apart.
A violation is a dataset with fewer owners of the listed types than required who are active or
of unknown status.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reflex_actions.controls.base import (
    MAX_COLUMN_NAME_CHARS,
    MAX_LIST_ITEMS,
    Control,
    count_field,
    validate_column_name,
)
from reflex_actions.sql import CompiledQuery, Relation, indent, quote_identifier

#: corpUserStatus.status of a user who can still act as an owner.
ACTIVE_STATUS = "ACTIVE"
#: Most owners a control may require of one dataset.
MAX_OWNERS = 1000


class OwnershipColumns(BaseModel):
    """Column names of the ownership snapshot; the defaults are what Reflex's exporter writes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = "dataset_urn"
    owner: str = "owner_urn"
    ownership_type: str = "ownership_type"
    owner_status: str = "owner_status"

    @field_validator("*")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return validate_column_name(value)


class ActiveOwnershipControl(Control):
    type: Literal["active_ownership"] = "active_ownership"
    min_active_owners: int = count_field(default=1, ge=1, le=MAX_OWNERS)
    owner_types: list[Annotated[str, Field(max_length=MAX_COLUMN_NAME_CHARS)]] | None = Field(
        default=None, min_length=1, max_length=MAX_LIST_ITEMS
    )
    columns: OwnershipColumns = OwnershipColumns()

    violation_unit: ClassVar[str] = "under-owned datasets"

    @field_validator("owner_types")
    @classmethod
    def _check_owner_types(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not item.strip() for item in value):
            raise ValueError("owner_types holds an empty ownership type")
        return value

    def required_columns(self) -> list[str]:
        c = self.columns
        return [c.dataset, c.owner, c.ownership_type, c.owner_status]

    def dataset_fields(self) -> list[str]:
        return []  # it reads ownership edges, not the dataset's rows

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> CompiledQuery:
        dataset, owner, ownership_type, status = (
            quote_identifier(name) for name in self.required_columns()
        )
        counted_type = "TRUE"
        params: dict[str, Any] = {
            **relation.params,
            "active_status": ACTIVE_STATUS,
            "min_active_owners": self.min_active_owners,
            "sample_size": sample_size,
        }
        if self.owner_types is not None:
            counted_type = f"list_contains($owner_types, {ownership_type})"
            params["owner_types"] = list(self.owner_types)
        grouped = relation.partition_select() + dataset
        under_owned = (
            f"active_owners + unknown_owners < $min_active_owners AND {dataset} IS NOT NULL"
        )
        sql = f"""WITH snapshot AS (
{indent(relation.sql)}
),
dataset_owners AS (
    SELECT {grouped},
        count(*) AS edges,
        count(DISTINCT {owner}) FILTER (WHERE {counted_type} AND {status} = $active_status)
            AS active_owners,
        count(DISTINCT {owner}) FILTER (WHERE {counted_type} AND coalesce({status}, '') = '')
            AS unknown_owners
    FROM snapshot
    GROUP BY {grouped}
)
SELECT
    {relation.partition_select()}coalesce(sum(edges), 0)::BIGINT AS rows_scanned,
    count(*) FILTER (WHERE {under_owned})::BIGINT AS violation_count,
    arg_min(
        row({dataset}, active_owners, unknown_owners),
        row(active_owners + unknown_owners, {dataset}),
        $sample_size
    ) FILTER (WHERE {under_owned}) AS sample
FROM dataset_owners{relation.partition_suffix()}"""
        return CompiledQuery(sql=sql, params=params)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        dataset, active_owners, unknown_owners = row
        return {
            "dataset": dataset,
            "active_owners": active_owners,
            "owners_of_unknown_status": unknown_owners,
        }

    def describe(self) -> str:
        kinds = ", ".join(self.owner_types) if self.owner_types else "any type"
        return (
            f"every dataset has at least {self.min_active_owners} active owner(s) of {kinds} "
            "(an owner of unknown status is not counted as gone)"
        )
