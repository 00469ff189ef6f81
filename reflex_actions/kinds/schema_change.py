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

from reflex_actions.backtest.history import History
from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls.schema_contract import SchemaContractControl, type_family_of
from reflex_actions.errors import SnapshotError
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import unique
from reflex_actions.similarity.lineage import Relation as LineageRelation
from reflex_actions.similarity.models import CatalogReader, Excluded, Signal, SimilarityQuery
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.vocabulary import display_name

SCHEMA_CHANGE = "schema_change"


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
    from reflex_actions.snapshots import duckdb_connection

    failures = set(failure_snapshots(history, incident_urn))
    con = duckdb_connection()
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
    incident_words = SCHEMA_WORDS
    controls = (SchemaContractControl,)
    #: a landed snapshot's schema, and a ``schemaMetadata`` change DataHub records
    triggers = frozenset({Trigger.LANDED_DATA, Trigger.ASPECT_CHANGE})
    key_signals = False  # a schema contract protects columns whether or not they are keys

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

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals, for a candidate the change reaches through lineage. A candidate
        lacking a contract column (or holding it in another family) is excluded: the contract
        states the candidate's own columns, so it would fail there at once."""
        relation = seen.relation
        if relation is not None and not isinstance(relation, SchemaLineage):
            raise Excluded(
                f"{relation.description}: a schema change at the source does not reach it"
            )
        try:
            return super().signals(seen)
        except Excluded as excluded:
            raise Excluded(f"{excluded}: the contract would fail on it at once") from None
