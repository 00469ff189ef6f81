"""Orphaned references: rows pointing at parents that do not exist (``referential_integrity``).

A child's field must hold only values its parent's field holds (an order line's ``order_id``
must name an order). Violations are non-NULL child rows whose value is absent from the parent's
snapshot; a NULL is never an orphan (missing values are another incident class). Values compare
natively when both columns have the same type, and by their text otherwise (a CSV snapshot is
read as text), so a typed child and a text parent still match ``7`` with ``'7'``.

Words: orphaned rows, dangling references, foreign keys, "no matching order", rows pointing at a
deleted or missing parent. Evidence: the parent is an upstream of the source with the field (or
a dataset the incident names); the history decides which field and parent broke — the incident's
snapshot holds values its paired parent snapshot lacks, while every normal snapshot's values
exist there. Similar assets are datasets with the field downstream of the same parent, or of a
dataset the parent was copied from, with that lineage path in the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reflex_actions.backtest.history import History
from reflex_actions.bounded import excerpt
from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.controls import Control
from reflex_actions.controls.referential_integrity import ReferentialIntegrityControl
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import FactReader, HistoryLookup, IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import unique
from reflex_actions.similarity.fields import describe, match_field, type_family
from reflex_actions.similarity.lineage import Relation as LineageRelation
from reflex_actions.similarity.models import CatalogReader, Excluded, Signal, SimilarityQuery
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.vocabulary import display_name

ORPHANED_REFERENCES = "orphaned_references"


# --- evidence ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParentLink:
    """A field of the source that may point at a field of a parent dataset."""

    child: FieldInfo
    parent: DatasetContext
    parent_field: FieldInfo
    #: why this dataset may be the parent (lineage or the incident's words)
    why: str

    def control(self) -> dict[str, Any]:
        return {
            "type": "referential_integrity",
            "field": self.child.name,
            "references": {"dataset": self.parent.urn, "field": self.parent_field.name},
        }


def parent_links(
    source: DatasetContext, facts: IncidentFacts, text: IncidentText
) -> list[ParentLink]:
    """Every (source field, parent field) pair with compatible types, where the parent is an
    upstream of the source or a dataset the incident names by urn; parents' keys first."""
    words = _words(text)
    named = re.findall(r"urn:li:dataset:\([^\s]*?\)(?=[\s.,;]|$)", words)
    for child in source.fields:  # datasets with the field whose name the incident says
        for urn in facts.catalog.datasets_by_field(child.name):
            if _named_in(urn, words):
                named.append(urn)
    links: list[ParentLink] = []
    for urn in dict.fromkeys([*source.upstreams, *named]):
        parent = facts.catalog.dataset(urn) if urn != source.urn else None
        if parent is None:
            continue
        why = "upstream of the source" if urn in source.upstreams else "named by the incident"
        for child in source.fields:
            match = match_field(child, parent, {})
            if match is not None and match.compatible:
                links.append(ParentLink(child, parent, match.target, why))
    return sorted(links, key=lambda link: not link.parent_field.is_key)


@dataclass(frozen=True)
class OrphanFinding:
    link: ParentLink
    fact: str


def discover_orphans(
    history: History, links: list[ParentLink], histories: HistoryLookup, incident_urn: str
) -> list[OrphanFinding]:
    """The links the history shows broken: orphans in every snapshot of this incident, and none
    in any evaluable normal snapshot (each child snapshot against its paired parent one)."""
    # the engine, only when evidence is gathered: loading the kind runs nothing
    from reflex_actions.backtest.engine import backtest

    failures = set(failure_snapshots(history, incident_urn))
    findings = []
    for link in links:
        parent_history = histories(link.parent.urn)
        if not failures or parent_history is None:
            continue
        control = ReferentialIntegrityControl.model_validate(link.control())
        report = backtest(
            control, [history], sample_size=3, references={link.parent.urn: parent_history}
        )
        outcomes = [o for o in report.per_snapshot if o.evaluable]
        failed = [o for o in outcomes if o.snapshot_id in failures]
        normal = [o for o in outcomes if not o.labelled_failure]
        if (
            failed
            and normal
            and all(o.flagged for o in failed)
            and not any(o.flagged for o in normal)
        ):
            examples = ", ".join(
                f"{excerpt(row['missing_parent_value'])} ({row['occurrences']})"
                for row in failed[0].sample
            )
            fact = (
                f"{link.child.name} in {', '.join(o.snapshot_id for o in failed)} holds "
                f"{sum(o.violation_count or 0 for o in failed)} rows whose value is absent from "
                f"{link.parent_field.name} of {display_name(link.parent.urn)} (e.g. {examples}); "
                f"in all {len(normal)} normal snapshots every value exists there"
            )
            findings.append(OrphanFinding(link, fact))
    return findings


def _words(text: IncidentText) -> str:
    return " ".join(text.fields().values())


# --- the kind ------------------------------------------------------------------------------------
ORPHAN_WORDS = re.compile(
    # "orphaned <anything>" except ownership's words (an orphaned dataset has no owner)
    r"\b(orphan(?:ed|s)? (?!ownership|owners?\b|datasets?\b|tables?\b|assets?\b)\w+|"
    r"dangling (?:references?|keys?|ids?|rows?)|foreign[- ]keys?|referential integrity|"
    r"no (?:matching|corresponding|existing) (?:parent|\w+)|"
    r"(?:point(?:s|ed|ing)?|refer(?:s|red|ring)?) (?:at|to) (?:an? )?(?:non-?existent|missing|"
    r"deleted|unknown|absent|rolled[- ]back) \w+|"
    r"(?:does|did|do) not exist in)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ParentLineage(LineageRelation):
    """A candidate's lineage to the parent a control references."""


class OrphanedReferencesKind(LessonKind):
    pattern = ORPHANED_REFERENCES
    title = "Rows pointing at parents that do not exist"
    incident_words = ORPHAN_WORDS
    controls = (ReferentialIntegrityControl,)
    triggers = frozenset({Trigger.LANDED_DATA})
    key_signals = False  # a child's reference is rarely its key, and need not be

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        evidence = unique(evidence)
        source = facts.source
        name = display_name(source.urn) if source else "the dataset"
        links = parent_links(source, facts, text) if source else []
        findings = (
            discover_orphans(facts.history, links, facts.histories, text.urn)
            if facts.history
            else []
        )
        words = _words(text).lower()
        if findings:
            finding = min(findings, key=lambda f: _rank(f.link, words, findings))
            evidence.append(Evidence(source="history", quote=finding.fact))
            link, confidence = finding.link, 0.85 if len(findings) == 1 else 0.7
            rationale = (
                f"The history shows {link.child.name} pointing at missing "
                f"{link.parent_field.name} values of {display_name(link.parent.urn)} only in "
                "the incident's snapshot."
            )
        elif links:
            link = min(links, key=lambda candidate: _rank(candidate, words, links))
            evidence.append(
                Evidence(
                    source="catalog",
                    quote=f"{display_name(link.parent.urn)} is {link.why} and has "
                    f"{describe(link.parent_field)}",
                )
            )
            confidence = 0.5
            rationale = (
                "No history shows the orphans; the parent is inferred from lineage and the "
                "shared field: a steward must confirm it."
            )
        else:
            return LessonDraft(
                failure_pattern=self.pattern,
                root_cause=f"Rows of {name} point at parents that do not exist.",
                evidence=evidence,
                control=None,
                confidence=0.3,
                rationale="No upstream of the dataset has a field its rows could point at: a "
                "steward must name the field and the dataset it references.",
            )
        return LessonDraft(
            failure_pattern=self.pattern,
            root_cause=f"Orphaned references in {name}: {link.child.name} held values missing "
            f"from {link.parent_field.name} of {display_name(link.parent.urn)}, and nothing "
            "rejected them.",
            evidence=evidence,
            control=link.control(),
            confidence=confidence,
            rationale=rationale,
        )

    def check_control(
        self, control: Control, source: DatasetContext | None, catalog: FactReader | None
    ) -> list[str]:
        """The referenced dataset is in the catalog and has the field, with a type the
        source's field can be compared with."""
        target = control.referenced()
        if target is None or catalog is None:
            return []
        parent = catalog.dataset(target.dataset)
        if parent is None:
            return [f"referenced dataset {excerpt(target.dataset)} is not in the catalog"]
        parent_field = parent.field(target.field)
        if parent_field is None:
            names = ", ".join(sorted(f.name for f in parent.fields)) or "no schema"
            return [
                f"referenced field {excerpt(target.field)} does not exist in {parent.name}; "
                f"it has {names}"
            ]
        child = source.field(control.required_columns()[0]) if source else None
        if child is not None and not _comparable(child, parent_field):
            return [
                f"{describe(child)} is {type_family(child)} but the referenced "
                f"{describe(parent_field)} of {parent.name} is {type_family(parent_field)}"
            ]
        return []

    # --- similar assets --------------------------------------------------------------------------
    def related_through(
        self, query: SimilarityQuery, source: DatasetContext, catalog: CatalogReader
    ) -> dict[str, LineageRelation]:
        """Datasets downstream of the parent (directly, or through one dataset between), or of
        a dataset the parent was copied from (an upstream of it with the referenced field)."""
        target = query.control.referenced()
        parent = catalog.dataset(target.dataset) if target else None
        if target is None or parent is None:
            return {}
        parent_name = display_name(parent.urn)
        origins = [
            (parent.urn, f"downstream of {parent_name}, the parent it references"),
            *(
                (
                    origin,
                    f"downstream of {display_name(origin)}, which {parent_name} (the parent it "
                    "references) was copied from",
                )
                for origin in parent.upstreams
                if _has_field(catalog.dataset(origin), target.field)
            ),
        ]
        related: dict[str, LineageRelation] = {}
        for hops, (origin, why) in enumerate(origins, start=1):
            hops = min(hops, 2)
            for urn in catalog.downstreams(origin):
                related.setdefault(urn, ParentLineage(hops, why))
                for further in catalog.downstreams(urn):
                    related.setdefault(
                        further, ParentLineage(hops + 1, f"{why}, through {display_name(urn)}")
                    )
        related.pop(parent.urn, None)
        return related

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        """The schema signals, for a candidate whose values can be checked against the same
        parent."""
        target = seen.query.control.referenced()
        if target is not None and seen.candidate.urn == target.dataset:
            raise Excluded("it is the dataset the control references")
        if not isinstance(seen.relation, ParentLineage):
            parent = display_name(target.dataset) if target else "the parent"
            raise Excluded(f"not downstream of {parent}: its values have no parent to check")
        return super().signals(seen)


def _named_in(urn: str, words: str) -> bool:
    """Whether the incident says the dataset's name (``shop.public.orders`` or ``orders``)."""
    name = display_name(urn)
    return any(
        re.search(rf"(?<![\w.]){re.escape(part)}(?![\w])", words, re.IGNORECASE)
        for part in {name, name.rsplit(".", 1)[-1]}
    )


def _has_field(dataset: DatasetContext | None, name: str) -> bool:
    return dataset is not None and match_field(FieldInfo(name=name), dataset, {}) is not None


def _comparable(child: FieldInfo, parent: FieldInfo) -> bool:
    child_family, parent_family = type_family(child), type_family(parent)
    return child_family is None or parent_family is None or child_family == parent_family


def _rank(link: ParentLink, words: str, among: list[Any]) -> tuple[bool, bool, bool, int]:
    """Links whose field the incident names first, then whose parent it names, then parents'
    keys, then the order found."""
    items = [getattr(item, "link", item) for item in among]
    field_named = re.search(rf"\b{re.escape(link.child.name.lower())}\b", words) is not None
    parent_named = _named_in(link.parent.urn, words)
    return (not field_named, not parent_named, not link.parent_field.is_key, items.index(link))
