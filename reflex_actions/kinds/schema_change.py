"""A breaking schema change: a column consumers read was renamed, dropped or retyped
(``schema_contract``).

The control judges a snapshot's schema, not its rows: a violation is each contract column the
snapshot lacks or holds in another type family, and (with ``allow_new_columns: false``) each
column the contract does not list. Types compare by family (integer of every width, decimal of
any precision, floating, string, boolean, date, time, timestamp, timestamp with time zone,
binary), so ``VARCHAR(64)`` -> ``VARCHAR`` or ``INTEGER`` -> ``BIGINT`` is no break; any other
type is a family of its own. The family table also lists the platforms' names (Postgres's
``character varying``, BigQuery's ``INT64``, Snowflake's ``NUMBER``, Avro's ``long``), so
the types an engine describes (in DuckDB's names), a contract's and DataHub's recorded ones are
read by one table. A missing column is a failed check, not schema drift: the control requires
no column to be evaluable. Families are decided here, from the table; the query joins the
columns found to the contract's, every name and type bound, so it reads alike in every dialect.

The schema DataHub records (``schemaMetadata``, ``Relation.recorded``) is judged by the same
query without reading data: its fields' names and types are bound in place of the columns an
engine describes. A field's ``nativeDataType`` decides its family where the table lists it and
DataHub's type class agrees; otherwise the class decides (``string``, ``enum`` -> string,
``boolean``, ``date``, ``time`` -> timestamp, ``bytes``, ``fixed`` -> binary), which also reads
Avro's physical type under a logical one (a ``long`` that is a ``timestamp-millis``) as the
logical type. The class ``number`` does not say integer, decimal or floating, so it is a family
of its own: a number of unknown native type confirms no numeric contract type (the sample shows
what DataHub records). A field with neither type is present, its type unjudged.

A CSV snapshot is read as text (every column VARCHAR), so its types say nothing of the data: on
CSV a contract checks column names only (a typed contract is not broken by Reflex's own text
reader), and a contract drafted from a CSV history states every column as VARCHAR.

Words: renamed, dropped or retyped columns, a (breaking) schema change, a column that no longer
exists, a changed type. Evidence: the incident's snapshot whose columns differ from the common
schema of the normal snapshots; the contract lists the normal-schema columns the incident broke
(not every normal column: those are what the evidence shows consumers lost, and what the
source's downstream consumers and siblings carry too, so the same contract fits them), typed as
the latest normal snapshot has them. Similar assets follow lineage: the source's downstream
consumers and the siblings fed by its upstreams, each with the lineage path in its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from reflex_actions.backtest.history import History
from reflex_actions.bounded import excerpt
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import Control
from reflex_actions.controls.base import (
    MAX_COLUMN_NAME_CHARS,
    MAX_LIST_ITEMS,
    validate_column_name,
)
from reflex_actions.errors import SnapshotError, SnapshotNotFoundError
from reflex_actions.kinds.base import LessonKind, StatusOf, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.lineage import Relation as LineageRelation
from reflex_actions.similarity.models import CatalogReader, Excluded, Signal, SimilarityQuery
from reflex_actions.sql import SNAPSHOT, ControlQuery, RecordedFacts, Relation, exp, param
from reflex_actions.vocabulary import display_name

SCHEMA_CHANGE = "schema_change"

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


# --- evidence ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchemaFinding:
    """The normal schema's columns an incident's snapshot(s) broke, and how."""

    #: column -> its type in the latest normal snapshot
    contract: dict[str, str]
    #: column -> what the failure snapshot holds instead (None: missing)
    found: dict[str, str | None]
    failure_snapshots: tuple[str, ...]
    normal_snapshots: int
    #: columns in the failure snapshot that no normal one has (e.g. a renamed column's new name)
    new_columns: tuple[str, ...]


def discover_schema_break(history: History, incident_urn: str) -> SchemaFinding | None:
    """The columns every normal snapshot has in one type family that the incident's failure
    snapshot(s) lack or hold in another; None without both kinds of snapshot or a break."""
    import duckdb  # here, not at module level: loading the kinds starts no engine

    failures = set(failure_snapshots(history, incident_urn))
    con = duckdb.connect()
    schemas: dict[str, dict[str, str]] = {}
    for snapshot in history.snapshots:
        try:
            schemas[snapshot.snapshot_id] = snapshot.column_types(con)
        except SnapshotError:
            continue
    con.close()
    normal = [sid for sid in schemas if sid not in history.labels]
    failed = sorted(sid for sid in schemas if sid in failures)
    if not normal or not failed:
        return None
    latest = schemas[normal[-1]]
    common = {
        name: kind
        for name, kind in latest.items()
        if all(
            name in schemas[sid] and type_family_of(schemas[sid][name]) == type_family_of(kind)
            for sid in normal
        )
    }
    found: dict[str, str | None] = {}
    for sid in failed:
        for name, kind in common.items():
            held = schemas[sid].get(name)
            if held is None or type_family_of(held) != type_family_of(kind):
                found.setdefault(name, held)
    if not found:
        return None
    known = {name for sid in normal for name in schemas[sid]}
    new = tuple(dict.fromkeys(n for sid in failed for n in schemas[sid] if n not in known))
    return SchemaFinding(
        contract={name: common[name] for name in found},
        found=found,
        failure_snapshots=tuple(failed),
        normal_snapshots=len(normal),
        new_columns=new,
    )


# --- the kind ------------------------------------------------------------------------------------
SCHEMA_WORDS = re.compile(
    r"\b((?:renamed|dropped|removed|retyped|deleted) (?:the )?(?:\w+ )?columns?|"
    r"columns? (?:\S+ )?(?:was |were |got )?(?:renamed|dropped|removed|retyped)|"
    r"(?:breaking )?schema (?:change|drift|break)s?|breaking change|"
    r"(?:column|field) \S+ (?:no longer exists|is gone|disappeared)|no longer exists|"
    r"(?:type|data ?type) (?:of \S+ )?(?:changed|change)|changed (?:its |the )?(?:data )?type)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SchemaLineage(LineageRelation):
    """A candidate a schema change at the source reaches: a consumer or a sibling."""


class SchemaChangeKind(LessonKind):
    pattern = SCHEMA_CHANGE
    title = "A breaking schema change"
    controls = (SchemaContractControl,)
    #: a landed snapshot's schema, and a ``schemaMetadata`` change DataHub records
    triggers = frozenset({Trigger.LANDED_DATA, Trigger.ASPECT_CHANGE})
    key_signals = False  # a schema contract protects columns whether or not they are keys

    def words(self, text: IncidentText) -> list[Evidence]:
        return quotes(text, SCHEMA_WORDS)

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        evidence = unique(evidence)
        source = facts.source
        name = display_name(source.urn) if source else "the dataset"
        finding = discover_schema_break(facts.history, text.urn) if facts.history else None
        if finding is None:
            return LessonDraft(
                failure_pattern=self.pattern,
                root_cause=f"A breaking schema change in {name}.",
                evidence=evidence,
                control=None,
                confidence=0.3,
                rationale="No snapshot of the history differs in its columns from the normal "
                "ones: a steward must name the columns (and types) consumers rely on.",
            )
        changes = "; ".join(
            f"{column} ({finding.contract[column]}) is "
            + (f"{held} there" if held is not None else "missing there")
            for column, held in finding.found.items()
        )
        new = f"; new columns {', '.join(finding.new_columns)}" if finding.new_columns else ""
        evidence.append(
            Evidence(
                source="history",
                quote=f"in all {finding.normal_snapshots} normal snapshots vs "
                f"{', '.join(finding.failure_snapshots)}: {changes}{new}",
            )
        )
        broken = ", ".join(finding.contract)
        return LessonDraft(
            failure_pattern=self.pattern,
            root_cause=f"A breaking schema change in {name}: {broken} changed where every "
            "earlier load had it, and nothing checked the schema consumers rely on.",
            evidence=evidence,
            control={"type": "schema_contract", "columns": finding.contract},
            confidence=0.85,
            rationale=f"The history shows {broken} in every normal snapshot and broken only "
            "in the incident's snapshot(s); the contract keeps those columns in their type "
            "family and allows new columns.",
        )

    # --- similar assets --------------------------------------------------------------------------
    def related_through(
        self, query: SimilarityQuery, source: DatasetContext, catalog: CatalogReader
    ) -> dict[str, LineageRelation]:
        """The source's consumers (directly or through one dataset) and the siblings fed by
        each of its upstreams, with the lineage path in each description."""
        name = display_name(source.urn)
        related: dict[str, LineageRelation] = {}
        for consumer in catalog.downstreams(source.urn):
            related.setdefault(
                consumer, SchemaLineage(1, f"reads {name} ({name} -> {display_name(consumer)})")
            )
        for consumer in list(related):
            for further in catalog.downstreams(consumer):
                related.setdefault(
                    further,
                    SchemaLineage(
                        2,
                        f"reads {name} through {display_name(consumer)} ({name} -> "
                        f"{display_name(consumer)} -> {display_name(further)})",
                    ),
                )
        for upstream in source.upstreams:
            feeder = display_name(upstream)
            for sibling in catalog.downstreams(upstream):
                related.setdefault(
                    sibling,
                    SchemaLineage(
                        2,
                        f"fed by {feeder} like {name} ({feeder} -> {display_name(sibling)})",
                    ),
                )
        related.pop(source.urn, None)
        return related

    def signals(
        self,
        query: SimilarityQuery,
        source: DatasetContext,
        candidate: DatasetContext,
        relation: LineageRelation | None,
        status_of: StatusOf,
        config: SimilarityConfig,
    ) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals, for a candidate the change reaches through lineage. A candidate
        lacking a contract column (or holding it in another family) is excluded: the contract
        states the candidate's own columns, so it would fail there at once."""
        if relation is not None and not isinstance(relation, SchemaLineage):
            raise Excluded(
                f"{relation.description}: a schema change at the source does not reach it"
            )
        try:
            return super().signals(query, source, candidate, relation, status_of, config)
        except Excluded as excluded:
            raise Excluded(f"{excluded}: the contract would fail on it at once") from None
