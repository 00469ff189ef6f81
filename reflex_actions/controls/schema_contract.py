"""The schema_contract control: a table's columns keep the names, types and type families a
contract lists; the control of the schema-change kind
(:mod:`reflex_actions.kinds.schema_change`, which drafts it).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from reflex_actions.bounded import excerpt
from reflex_actions.controls import Control
from reflex_actions.controls.base import (
    MAX_COLUMN_NAME_CHARS,
    MAX_LIST_ITEMS,
    validate_column_name,
)
from reflex_actions.errors import SnapshotNotFoundError
from reflex_actions.sql import SNAPSHOT, ControlQuery, RecordedFacts, Relation, exp, param

#: Longest type name a contract may state (``TIMESTAMP WITH TIME ZONE`` is 24 characters).
MAX_TYPE_CHARS = 64


#: A type name: words, optionally with a length or a precision and scale (``DECIMAL(18, 2)``).
TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]*(?: [A-Z][A-Z0-9_]*)*(?:\(\d{1,5}(?:,\d{1,5})?\))?")


#: The type families: a type whose name (without its parameters) is listed here compares by its
#: family; any other type is a family of its own. One table for the types an engine describes
#: (DuckDB's names), a contract's and the native types DataHub records (the platforms' names:
#: Postgres, BigQuery, Snowflake, Spark, Avro), so each is read alike. Snowflake's
#: ``NUMBER(38,0)`` (its INTEGER) is a decimal, as DuckDB's ``DECIMAL(18,0)`` is.
TYPE_FAMILIES: dict[str, tuple[str, ...]] = {
    "integer": (
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
        "UINTEGER", "UBIGINT", "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "SHORT",
        "LONG", "SIGNED",
        "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BYTEINT",
        "SMALLSERIAL", "SERIAL", "BIGSERIAL",
    ),
    "decimal": ("DECIMAL", "NUMERIC", "DEC", "NUMBER", "BIGNUMERIC", "BIGDECIMAL"),
    "floating": (
        "FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8", "FLOAT32", "FLOAT64", "DOUBLE PRECISION",
    ),
    "string": (
        "VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "NVARCHAR", "NCHAR", "CHARACTER",
        "CHARACTER VARYING", "VARCHAR2", "NVARCHAR2", "CLOB",
    ),
    "boolean": ("BOOLEAN", "BOOL"),
    "date": ("DATE",),
    "time": ("TIME", "TIME WITHOUT TIME ZONE"),
    "timestamp": (
        "TIMESTAMP", "DATETIME", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
        "TIMESTAMP WITHOUT TIME ZONE", "TIMESTAMP_NTZ", "DATETIME2",
    ),
    "timestamp with time zone": (
        "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIMESTAMP_TZ", "TIMESTAMP_LTZ",
    ),
    "binary": ("BLOB", "BYTEA", "BINARY", "VARBINARY", "BYTES"),
}  # fmt: skip


#: DataHub's type class of a field (as ``catalog.translate.fields_of`` names it) -> the family
#: it stands for and the families a native type may refine it to. ``number`` stands for a
#: family of its own: it may be an integer, a decimal or a floating type. A class not listed
#: (``record``, ``array``, ``map``, ``union``, ``null``) leaves the native type to decide.
TYPE_CLASS_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "string": ("string", ("string",)),
    "enum": ("string", ("string",)),
    "boolean": ("boolean", ("boolean",)),
    "date": ("date", ("date",)),
    "time": ("timestamp", ("time", "timestamp", "timestamp with time zone")),
    "bytes": ("binary", ("binary",)),
    "fixed": ("binary", ("binary",)),
    "number": ("number", ("integer", "decimal", "floating")),
}


_FAMILY_OF = {name: family for family, names in TYPE_FAMILIES.items() for name in names}


#: A type's parameters (a length, a precision and scale), which its family ignores.
TYPE_PARAMETERS = r"\([^()]*\)"


#: The columns of the rows a contract judges: the contract's and the ones found.
_JUDGED = ("name", "type", "family")


def written_as_type(value: str) -> str:
    """A type as a contract writes it: upper case, single spaces, none around a comma or
    before a parenthesis (``decimal (18, 2)`` -> ``DECIMAL(18,2)``)."""
    normal = re.sub(r"\s*,\s*", ",", re.sub(r"\s+", " ", value.strip().upper()))
    return normal.replace(" (", "(")


def type_name(value: str) -> str:
    """A contract's type name, upper case with single spaces; raise ValueError naming it when
    it is not a type name."""
    normal = written_as_type(value)
    if len(normal) > MAX_TYPE_CHARS or not TYPE_NAME.fullmatch(normal):
        raise ValueError(
            f"type {excerpt(value)} is not a type name (e.g. BIGINT, VARCHAR, DECIMAL(18,2)) "
            f"of at most {MAX_TYPE_CHARS} characters"
        )
    return normal


def _listed_family(type_text: str) -> str | None:
    """The family the table lists a type's name (without its parameters) in, if any."""
    return _FAMILY_OF.get(re.sub(TYPE_PARAMETERS, "", type_text.upper()).strip())


def type_family_of(type_text: str) -> str:
    """The family a type compares by: the listed one, else the type is a family of its own."""
    return _listed_family(type_text) or type_text.upper()


def _recorded_family(native_type: str | None, type_class: str | None) -> str | None:
    """The family of a field DataHub records: its native type's where DataHub's type class
    agrees (a ``number`` that is a ``BIGINT``), else the class's; the native type's alone for a
    class the table does not list; None (unjudged) for a field with neither."""
    listed = None if native_type is None else _listed_family(native_type)
    if type_class in TYPE_CLASS_FAMILIES:
        family, refined_by = TYPE_CLASS_FAMILIES[type_class]
        return listed if listed in refined_by else family
    return None if native_type is None else type_family_of(native_type)


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and "...": longer than any contract name or
    type may be, so a cut value never equals one, and a sample never carries megabytes."""
    return text if len(text) <= limit else text[:limit] + "..."


def _recorded_columns(recorded: RecordedFacts) -> list[tuple[str, str | None, str | None]]:
    """The recorded schema's fields as (name, type shown, family): names and classes bounded,
    native types written as a contract writes types (a type longer than a contract's may be is
    no type the family table lists; it is cut), shown as the class where DataHub records no
    native type. A name DataHub records twice (a union's branches share a simple path) is
    judged by its first field."""
    if not recorded.columns:
        raise SnapshotNotFoundError(
            "DataHub records no schema (schemaMetadata fields) for this dataset: "
            "its columns cannot be judged without reading its data"
        )
    fields: dict[str, tuple[str | None, str | None]] = {}
    for name, native_type, type_class in recorded.columns:
        fields.setdefault(
            _cut(name, MAX_COLUMN_NAME_CHARS),
            (
                None if native_type is None else written_as_type(_cut(native_type, MAX_TYPE_CHARS)),
                None if type_class is None else _cut(type_class, MAX_TYPE_CHARS),
            ),
        )
    return [
        (name, native or type_class, _recorded_family(native, type_class))
        for name, (native, type_class) in fields.items()
    ]


def _bound_rows(
    prefix: str, rows: list[tuple[str, str | None, str | None]], params: dict[str, Any]
) -> exp.Select:
    """``rows`` (name, type, family) as a table of bound values (each added to ``params``
    under a name starting with ``prefix``): names and types come from users and catalogs."""
    values = []
    for index, row in enumerate(rows):
        cells: list[exp.Expression] = []
        for part, value in zip(_JUDGED, row, strict=True):
            params[f"{prefix}_{part}_{index}"] = value
            cells.append(param(f"{prefix}_{part}_{index}"))
        values.append(exp.tuple_(*cells))
    if values:  # the first row types the columns (text, even where a value is NULL)
        values[0] = exp.tuple_(*(exp.cast(cell, "VARCHAR") for cell in values[0].expressions))
    empty = not values
    if empty:  # VALUES needs a row: one of NULLs, filtered out
        values = [exp.tuple_(*(exp.cast(exp.null(), "VARCHAR") for _ in _JUDGED))]
    table = exp.Values(
        expressions=values,
        alias=exp.TableAlias(
            this=exp.to_identifier(prefix), columns=[exp.to_identifier(c) for c in _JUDGED]
        ),
    )
    query = exp.select(*_JUDGED).from_(table)
    return query.where(exp.false()) if empty else query


class SchemaContractControl(Control):
    """The snapshot has the listed columns, each in the listed type's family, and (unless new
    columns are allowed) no others; the sample lists each broken column."""

    type: Literal["schema_contract"] = "schema_contract"
    columns: dict[str, str] = Field(min_length=1, max_length=MAX_LIST_ITEMS)
    allow_new_columns: bool = Field(default=True, strict=True)

    violation_unit: ClassVar[str] = "columns missing, retyped or not in the contract"

    @field_validator("columns")
    @classmethod
    def _check_columns(cls, value: dict[str, str]) -> dict[str, str]:
        return {validate_column_name(name): type_name(kind) for name, kind in value.items()}

    def required_columns(self) -> list[str]:
        """None: a snapshot lacking a contract column is a failed check, not one that cannot
        be evaluated (the executor refuses a snapshot missing a required column)."""
        return []

    def judged_on_recorded(self) -> frozenset[str]:
        return frozenset({"columns"})  # the schemaMetadata fields: no data read

    def dataset_fields(self) -> list[str]:
        return list(self.columns)

    def with_dataset_fields(self, mapping: dict[str, str]) -> SchemaContractControl:
        """The same contract on a dataset that names the columns differently."""
        renamed = {mapping.get(name, name): kind for name, kind in self.columns.items()}
        return self.model_copy(update={"columns": renamed})

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """The snapshot's columns as its engine described them (or the fields DataHub records
        of the table, reading no rows), each typed by family here, bound, and joined by name to
        the contract's; the counts count the broken columns, the sample lists them by name."""
        params: dict[str, Any] = {}
        if relation.recorded is not None:
            found = _recorded_columns(relation.recorded)
            scanned: exp.Expression = exp.Literal.number(0)
        else:
            found = [(name, kind, type_family_of(kind)) for name, kind in relation.types.items()]
            scanned = exp.select(exp.func("count", exp.Star())).from_(SNAPSHOT).subquery()
        expected = [(name, kind, type_family_of(kind)) for name, kind in self.columns.items()]
        contract, held = exp.column("name", "expected"), exp.column("name", "found")
        broken = [exp.and_(contract.is_(exp.null()).not_(), held.is_(exp.null()))]
        if not relation.text_only:  # a reader's text says nothing of the types
            retyped = exp.column("family", "found").neq(exp.column("family", "expected"))
            broken.append(exp.and_(contract.is_(exp.null()).not_(), retyped))
        if not self.allow_new_columns:
            broken.append(contract.copy().is_(exp.null()))
        judged = (
            exp.select(
                exp.func("coalesce", contract, held).as_("name"),
                exp.column("type", "expected").as_("expected"),
                exp.column("type", "found").as_("found"),
            )
            .from_("expected")
            .join("found", on=held.copy().eq(contract.copy()), join_type="FULL")
            .where(exp.or_(*broken))
        )
        tables = {
            "found": _bound_rows("found", found, params),
            "expected": _bound_rows("expected", expected, params),
            "broken": judged,
        }
        counts = exp.select(
            scanned.as_("rows_scanned"),
            exp.select(exp.func("count", exp.Star())).from_("broken").subquery()
            .as_("violation_count"),
        )  # fmt: skip
        sample = (
            exp.select("name", "expected", "found")
            .from_("broken")
            .order_by(exp.Ordered(this=exp.column("name"), nulls_first=False))
            .limit(sample_size)
        )
        for name, table in tables.items():
            counts, sample = counts.with_(name, table), sample.with_(name, table)
        return ControlQuery(counts=counts, sample=sample, params=params)

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        column, expected, found = row
        return {"column": column, "expected": expected, "found": found}

    def describe(self) -> str:
        listed = ", ".join(f"{name} {kind}" for name, kind in self.columns.items())
        others = "others allowed" if self.allow_new_columns else "no others"
        return f"has columns {listed} (types by family), {others}"
