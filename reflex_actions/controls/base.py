"""The contract every control type implements.

A control type is one module in this package defining a subclass of :class:`Control` decorated
with :func:`register_control`. Specs are strict: unknown keys are rejected.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from reflex_actions.bounded import excerpt
from reflex_actions.errors import ControlSpecError
from reflex_actions.sql import ControlQuery, Relation

#: Upper bound of every count in a spec: beyond any table Reflex will scan, far below overflow.
MAX_COUNT = 10**12
#: Longest column name (PostgreSQL allows 63 bytes, Snowflake 255 characters).
MAX_COLUMN_NAME_CHARS = 255
#: Most columns or values one spec list may name.
MAX_LIST_ITEMS = 64
#: Longest dataset urn a spec may name (real ones are well under 300 characters).
MAX_URN_CHARS = 1000


def count_field(default: int, ge: int = 0, le: int = MAX_COUNT) -> Any:
    """A strict, bounded integer spec field: ``true`` is not 1 and ``'3'`` is not 3."""
    return Field(default=default, ge=ge, le=le, strict=True)


def validate_column_name(name: str) -> str:
    """Column names may hold any character (they are quoted), but not be empty, hold NUL, or be
    longer than any engine allows."""
    if not name.strip() or "\x00" in name:
        raise ValueError(f"column name {excerpt(name)} is empty or contains a NUL byte")
    if len(name) > MAX_COLUMN_NAME_CHARS:
        raise ValueError(
            f"column name {excerpt(name)} is {len(name)} characters long; "
            f"at most {MAX_COLUMN_NAME_CHARS} are allowed"
        )
    return name


#: A column name a spec gives: checked by :func:`validate_column_name`.
ColumnName = Annotated[str, AfterValidator(validate_column_name)]


class ReferencedField(BaseModel):
    """A field of another dataset that a control checks values against (a child's parent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str = Field(max_length=MAX_URN_CHARS)
    field: ColumnName

    @field_validator("dataset")
    @classmethod
    def _a_dataset_urn(cls, value: str) -> str:
        if not (value.startswith("urn:li:dataset:(") and value.endswith(")")):
            raise ValueError(f"{excerpt(value)} is not a dataset urn (urn:li:dataset:(...))")
        return value


class Control(BaseModel, ABC):
    """A typed, validated control spec that compiles to sqlglot query trees any engine renders."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str

    #: Human name of what one violation counts (e.g. "duplicate rows").
    violation_unit: ClassVar[str] = "violations"
    #: Whether its verdict depends on when it is judged (a table's age): its relation then
    #: carries ``as_of_ms``, and time passing alone is reason to judge it again.
    judged_as_of: ClassVar[bool] = False

    @abstractmethod
    def required_columns(self) -> list[str]:
        """Columns a snapshot must have for this control to be evaluable."""

    def dataset_fields(self) -> list[str]:
        """Fields the control needs in the dataset's own schema (what similar assets must have).

        Usually the snapshot columns; a control over another table (e.g. ownership edges) has none.
        """
        return self.required_columns()

    def referenced(self) -> ReferencedField | None:
        """The other dataset's field this control is checked against, if any: its relation then
        carries that dataset's snapshot as ``reference``."""
        return None

    def reads_data(self) -> bool:
        """Whether it reads a snapshot's rows; False for one judged on what DataHub records
        alone (e.g. a table's last update), which a landing has nothing to add to."""
        return True

    def judged_on_recorded(self) -> frozenset[str]:
        """The facts DataHub records (fields of ``RecordedFacts``: ``row_count``,
        ``last_updated_ms``, ``columns``) it can be judged on without reading data; a change
        of the aspect holding one then evaluates it (e.g. a new ``datasetProfile``)."""
        return frozenset()

    def earlier_counts_needed(self) -> int:
        """How many earlier row counts of the dataset this control judges against (its
        relation then carries them as ``earlier_counts``, and a backtest evaluates the
        snapshots one at a time in order); 0 for a control that needs none."""
        return 0

    def with_dataset_fields(self, mapping: dict[str, str]) -> Control:
        """The same control on a dataset that names its fields differently (source -> target)."""
        if not mapping:
            return self
        raise ControlSpecError(f"{self.type} controls cannot rename fields")

    def bound_from(self, relation: Relation) -> dict[str, Any]:
        """The values its queries bind that come from what is known of the relation (its
        time, its earlier counts, the facts DataHub records), not from its shape: a control
        compiled once for a shape binds these anew for each relation of that shape (a sweep
        judges thousands of datasets on one compiled control). The compile binds them too."""
        return {}

    @abstractmethod
    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """The counts query (rows_scanned, violation_count[, measures]) over ``relation`` and
        the sample query of up to ``sample_size`` worst offenders, run only when they fail."""

    @abstractmethod
    def allowed_violations(self, rows_scanned: int) -> int:
        """The control passes while violation_count is at most this, on a snapshot of
        ``rows_scanned`` rows (an allowance may be a share of them)."""

    @abstractmethod
    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """Turn one raw sample tuple from the query into a readable record."""

    @abstractmethod
    def describe(self) -> str:
        """One line a steward reads, e.g. ``transaction_id is unique``."""


def column_list(value: list[str] | None, what: str) -> list[str] | None:
    """A list of distinct, valid column names (``what`` names the spec key in errors)."""
    if value is None:
        return None
    for name in value:
        validate_column_name(name)
    if len(set(value)) != len(value):
        twice = next(name for name in value if value.count(name) > 1)
        raise ValueError(f"{what} lists the column {excerpt(twice)} twice")
    return value


class FieldsControl(Control):
    """A control over one column (``field``) or several (``fields``): exactly one is given."""

    field: str | None = None
    fields: list[str] | None = Field(default=None, min_length=1, max_length=MAX_LIST_ITEMS)

    #: what ``fields`` are, in the error when neither or both are given
    fields_are: ClassVar[str] = "columns"

    @field_validator("field")
    @classmethod
    def _check_field(cls, value: str | None) -> str | None:
        return None if value is None else validate_column_name(value)

    @field_validator("fields")
    @classmethod
    def _check_fields(cls, value: list[str] | None) -> list[str] | None:
        return column_list(value, "fields")

    @model_validator(mode="after")
    def _exactly_one_of_field_or_fields(self) -> FieldsControl:
        if (self.field is None) == (self.fields is None):
            raise ValueError(
                f"give exactly one of 'field' (a column) or 'fields' ({self.fields_are})"
            )
        return self

    @property
    def listed_fields(self) -> list[str]:
        return [self.field] if self.field is not None else list(self.fields or [])

    def renamed_fields(self, mapping: dict[str, str]) -> dict[str, Any]:
        """``field`` or ``fields`` renamed (source -> dataset field), as spec keys."""
        renamed = [mapping.get(name, name) for name in self.listed_fields]
        return {"field": renamed[0]} if self.field is not None else {"fields": renamed}


def control_type_of(control: type[Control]) -> str:
    """The type a control model parses (the default of its ``type`` literal)."""
    return str(control.model_fields["type"].default)
