"""A breaking schema change: a column consumers read was renamed, dropped or retyped
(``schema_contract``).

The control judges a snapshot's schema, not its rows: a violation is each contract column the
snapshot lacks or holds in another type family, and (with ``allow_new_columns: false``) each
column the contract does not list. Types compare by family (integer of every width, decimal of
any precision, floating, string, boolean, date, time, timestamp, timestamp with time zone,
binary), so ``VARCHAR(64)`` -> ``VARCHAR`` or ``INTEGER`` -> ``BIGINT`` is no break; any other
type is a family of its own. The family table also lists the platforms' names (Postgres's
``character varying``, BigQuery's ``INT64``, Snowflake's ``NUMBER``, Avro's ``long``), so
DESCRIBE's types, a contract's and DataHub's recorded ones are read by one table. A missing
column is a failed check, not schema drift: the control requires no column to be evaluable.

The schema DataHub records (``schemaMetadata``, ``Relation.recorded``) is judged by the same
query without reading data: its fields' names and types are bound in place of DESCRIBE's. A
field's ``nativeDataType`` decides its family where the table lists it and DataHub's type class
agrees; otherwise the class decides (``string``, ``enum`` -> string, ``boolean``, ``date``,
``time`` -> timestamp, ``bytes``, ``fixed`` -> binary), which also reads Avro's physical type
under a logical one (a ``long`` that is a ``timestamp-millis``) as the logical type. The class
``number`` does not say integer, decimal or floating, so it is a family of its own: a number
of unknown native type confirms no numeric contract type (the sample shows what DataHub
records). A field with neither type is present, its type unjudged.

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
from reflex_actions.errors import ControlSpecError, SnapshotError, SnapshotNotFoundError
from reflex_actions.kinds.base import LessonKind, StatusOf, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import quotes, unique
from reflex_actions.similarity.config import SimilarityConfig
from reflex_actions.similarity.lineage import Relation as LineageRelation
from reflex_actions.similarity.models import CatalogReader, Excluded, Signal, SimilarityQuery
from reflex_actions.sql import CompiledQuery, RecordedFacts, Relation, indent
from reflex_actions.vocabulary import display_name

SCHEMA_CHANGE = "schema_change"

#: Longest type name a contract may state (``TIMESTAMP WITH TIME ZONE`` is 24 characters).
MAX_TYPE_CHARS = 64
#: A type name: words, optionally with a length or a precision and scale (``DECIMAL(18, 2)``).
TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]*(?: [A-Z][A-Z0-9_]*)*(?:\(\d{1,5}(?:,\d{1,5})?\))?")

#: The type families: a type whose name (without its parameters) is listed here compares by its
#: family; any other type is a family of its own. One table for DESCRIBE's types (DuckDB's
#: names), a contract's and the native types DataHub records (the platforms' names: Postgres,
#: BigQuery, Snowflake, Spark, Avro), so each is read alike. Snowflake's ``NUMBER(38,0)`` (its
#: INTEGER) is a decimal, as DuckDB's ``DECIMAL(18,0)`` is.
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
#: A type's parameters (a length, a precision and scale), which its family ignores; the same
#: pattern in Python and in the SQL.
TYPE_PARAMETERS = r"\([^()]*\)"


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


def type_family_of(type_text: str) -> str:
    """The family a type compares by (the Python twin is only for drafting; SQL decides runs)."""
    base = re.sub(TYPE_PARAMETERS, "", type_text.upper()).strip()
    return _FAMILY_OF.get(base, type_text.upper())


def _sql_list(names: tuple[str, ...]) -> str:
    return f"[{', '.join(repr(name) for name in names)}]"


def _family_values() -> str:
    """The family table as SQL VALUES rows, one per family: constants of this module, never
    user input."""
    return ",\n".join(
        f"('{family}', {_sql_list(names)})" for family, names in TYPE_FAMILIES.items()
    )


def _class_values() -> str:
    """The type-class table as SQL VALUES rows: constants of this module, never user input."""
    return ",\n".join(
        f"('{type_class}', '{family}', {_sql_list(refined_by)})"
        for type_class, (family, refined_by) in TYPE_CLASS_FAMILIES.items()
    )


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and "...": longer than any contract name or
    type may be, so a cut value never equals one, and a sample never carries megabytes."""
    return text if len(text) <= limit else text[:limit] + "..."


def _recorded_fields(recorded: RecordedFacts) -> dict[str, list[str | None]]:
    """The recorded schema's fields as the bound lists the query reads in place of DESCRIBE:
    names and classes bounded, native types written as a contract writes types (a type longer
    than a contract's may be is no type the family table lists; it is cut). A name DataHub
    records twice (a union's branches share a simple path) is judged by its first field."""
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
    return {
        "recorded_names": list(fields),
        "recorded_types": [native for native, _ in fields.values()],
        "recorded_classes": [type_class for _, type_class in fields.values()],
    }


def _base_type(column: str) -> str:
    """SQL: the type in ``column`` without its parameters, the name the family table lists."""
    return f"trim(regexp_replace({column}, '{TYPE_PARAMETERS}', '', 'g'))"


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

    def compile(self, relation: Relation, sample_size: int = 5) -> CompiledQuery:
        """The snapshot's columns as DuckDB describes them (or the fields DataHub records of
        the table, bound, reading no rows), joined by name to the contract's, both typed by
        family; one snapshot at a time, as a relation over many files has their union of
        columns, not each one's."""
        if relation.partition_column:
            raise ControlSpecError(
                f"{self.type} judges one snapshot's schema at a time; "
                "a relation over several snapshots has only their union of columns"
            )
        recorded: dict[str, list[str | None]] = {}
        if relation.recorded is not None:
            recorded = _recorded_fields(relation.recorded)
            found = """SELECT
        unnest($recorded_names::VARCHAR[]) AS name,
        unnest($recorded_types::VARCHAR[]) AS type,
        unnest($recorded_classes::VARCHAR[]) AS type_class"""
            scanned = "0"
        else:
            found = """SELECT column_name AS name, column_type AS type, NULL::VARCHAR AS type_class
    FROM (DESCRIBE snapshot)"""
            scanned = "(SELECT count(*) FROM snapshot)"
        sql = f"""WITH snapshot AS NOT MATERIALIZED (
{indent(relation.sql)}
),
found AS (
    {found}
),
expected AS (
    SELECT unnest($column_names) AS name, unnest($column_types) AS type
),
type_families(family, type_names) AS (
    VALUES
{indent(_family_values(), 8)}
),
class_families(type_class, family, refined_by) AS (
    VALUES
{indent(_class_values(), 8)}
),
typed AS (
    SELECT
        coalesce(expected.name, found.name) AS name,
        expected.type AS expected,
        coalesce(found.type, found.type_class) AS found,
        found.name IS NOT NULL AS present,
        coalesce(expected_family.family, expected.type) AS expected_family,
        CASE
            WHEN class_family.family IS NULL THEN coalesce(found_family.family, found.type)
            WHEN list_contains(class_family.refined_by, found_family.family)
                THEN found_family.family
            ELSE class_family.family
        END AS found_family
    FROM expected
    FULL JOIN found ON found.name = expected.name
    LEFT JOIN type_families AS expected_family
        ON list_contains(expected_family.type_names, {_base_type("expected.type")})
    LEFT JOIN type_families AS found_family
        ON list_contains(found_family.type_names, {_base_type("found.type")})
    LEFT JOIN class_families AS class_family ON class_family.type_class = found.type_class
),
broken AS (
    SELECT name, expected, found
    FROM typed
    WHERE (expected IS NOT NULL AND NOT present)
        OR (expected IS NOT NULL AND NOT $text_only AND found_family <> expected_family)
        OR (expected IS NULL AND NOT $allow_new_columns)
)
SELECT
    {scanned}::BIGINT AS rows_scanned,
    (SELECT count(*) FROM broken)::BIGINT AS violation_count,
    (SELECT (list(row(name, expected, found) ORDER BY name))[1:$sample_size]
        FROM broken) AS sample"""
        params = {
            **relation.params,
            "column_names": list(self.columns),
            "column_types": list(self.columns.values()),
            "allow_new_columns": self.allow_new_columns,
            "text_only": relation.text_only,
            "sample_size": sample_size,
            **recorded,
        }
        return CompiledQuery(sql=sql, params=params)

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
