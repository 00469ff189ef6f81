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
from reflex_actions.sql import SNAPSHOT, ControlQuery, Relation, column, count_where, exp, param

#: corpUserStatus.status of a user who can still act as an owner.
ACTIVE_STATUS = "ACTIVE"
#: Most owners a control may require of one dataset.
MAX_OWNERS = 1000
#: The query's table of each dataset's owner counts.
DATASET_OWNERS = "dataset_owners"


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

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """Per dataset, its distinct owners of the counted types who are active, and those of
        unknown status; the counts sum the edges and count the under-owned datasets, the sample
        (run only when there are some) lists them, fewest owners first."""
        dataset, owner, ownership_type, status = (column(name) for name in self.required_columns())
        params: dict[str, Any] = {
            "active_status": ACTIVE_STATUS,
            "min_active_owners": self.min_active_owners,
        }
        counted: list[exp.Expression] = []
        if self.owner_types is not None:
            names = [f"owner_type_{index}" for index in range(len(self.owner_types))]
            params.update(zip(names, self.owner_types, strict=True))
            counted.append(ownership_type.isin(*(param(name) for name in names)))

        def distinct_owners(condition: exp.Expression) -> exp.Count:
            when = exp.and_(*counted, condition)
            return exp.Count(this=exp.Distinct(expressions=[exp.case().when(when, owner)]))

        unknown = exp.func("coalesce", status, exp.Literal.string("")).eq(exp.Literal.string(""))
        per_dataset = (
            exp.select(
                dataset,
                exp.func("count", exp.Star()).as_("edges"),
                distinct_owners(status.eq(param("active_status"))).as_("active_owners"),
                distinct_owners(unknown).as_("unknown_owners"),
            )
            .from_(SNAPSHOT)
            .group_by(dataset)
        )
        owners = exp.column("active_owners") + exp.column("unknown_owners")
        under_owned = exp.and_(owners < param("min_active_owners"), dataset.is_(exp.null()).not_())
        datasets = exp.select().from_(DATASET_OWNERS).with_(DATASET_OWNERS, as_=per_dataset)
        edges = exp.func("coalesce", exp.func("sum", exp.column("edges")), 0)
        counts = datasets.select(
            exp.cast(edges, exp.DataType.Type.BIGINT).as_("rows_scanned"),
            count_where(under_owned).as_("violation_count"),
        )
        sample = (
            datasets.select(dataset, "active_owners", "unknown_owners")
            .where(under_owned)
            .order_by(owners, dataset)
            .limit(sample_size)
        )
        return ControlQuery(counts=counts, sample=sample, params=params)

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
