"""Empty tables: a load that wrote no rows (``row_count_min``), as a kind from another package.

Words: empty, no rows, zero rows, missing rows. Evidence: the row counts of the source's
history; the drafted minimum is the smallest that catches every labelled failure there (1 for
an empty table). Similar assets are ranked by what empties a table too: lineage first (an empty
upstream empties its downstreams), then domain and platform.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from sqlglot import exp

from reflex_actions.backtest import backtest
from reflex_actions.controls import Control
from reflex_actions.controls.base import count_field
from reflex_actions.kinds.base import LessonKind, Trigger
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.similarity.models import Signal, shared_domain
from reflex_actions.similarity.weighing import Weighing
from reflex_actions.sql import SNAPSHOT, ControlQuery, Relation, param
from reflex_actions.vocabulary import display_name

EMPTY_WORDS = re.compile(
    r"\b(empty|emptied|no rows|zero rows|0 rows|missing rows|(?:wrote|loaded|landed) nothing)\b",
    re.IGNORECASE,
)
#: the signal weights of this kind (a candidate is recommended at the resolver's threshold)
LINEAGE_WEIGHT, DOMAIN_WEIGHT, PLATFORM_WEIGHT = 0.4, 0.2, 0.05


class RowCountMinControl(Control):
    """A snapshot holds at least ``min_rows`` rows; each missing row is one violation."""

    type: Literal["row_count_min"] = "row_count_min"
    min_rows: int = count_field(default=1, ge=1)

    violation_unit: ClassVar[str] = "missing rows"

    def required_columns(self) -> list[str]:
        return []  # it counts rows, whatever their columns

    def allowed_violations(self, rows_scanned: int) -> int:
        return 0

    def compile(self, relation: Relation, sample_size: int = 5) -> ControlQuery:
        """The rows and how many short of the minimum they are; the sample, run only when
        short, is the one row of the count and the minimum."""
        rows = exp.func("count", exp.Star())
        short = exp.func("greatest", param("min_rows") - rows, 0)
        counts = exp.select(rows.as_("rows_scanned"), short.as_("violation_count"))
        minimum = exp.cast(param("min_rows"), exp.DataType.Type.BIGINT)
        sample = exp.select(rows.copy().as_("row_count"), minimum.as_("min_rows"))
        return ControlQuery(
            counts=counts.from_(SNAPSHOT),
            sample=sample.from_(SNAPSHOT).limit(sample_size),
            params={"min_rows": self.min_rows},
        )

    def sample_row(self, row: tuple[Any, ...]) -> dict[str, Any]:
        rows, min_rows = row
        return {"rows": rows, "min_rows": min_rows}

    def describe(self) -> str:
        return f"holds at least {self.min_rows} row(s)"


class EmptyTableKind(LessonKind):
    pattern = "empty_table"
    title = "A load that left a table empty"
    incident_words = EMPTY_WORDS
    controls = (RowCountMinControl,)
    triggers = frozenset({Trigger.LANDED_DATA})

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        name = display_name(facts.source.urn) if facts.source else "the dataset"
        normal, failed = _row_counts(facts)
        if failed and normal and max(failed) < min(normal):
            min_rows = max(failed) + 1  # the smallest minimum that catches every failure
            fact = (
                f"the {len(normal)} normal snapshots hold {min(normal)} rows or more; "
                f"the {len(failed)} labelled failure(s) hold {', '.join(map(str, failed))}"
            )
            evidence = [*evidence, Evidence(source="history", quote=fact)]
            confidence, rationale = 0.9, "The history separates the failures by row count."
        else:
            min_rows, confidence = 1, 0.6
            rationale = "No history separates the failures: the table must simply not be empty."
        return LessonDraft(
            failure_pattern=self.pattern,
            root_cause=f"A load left {name} without its rows and nothing noticed.",
            evidence=evidence,
            control={"type": "row_count_min", "min_rows": min_rows},
            confidence=confidence,
            rationale=rationale,
        )

    def signals(self, seen: Weighing) -> tuple[list[Signal], dict[str, str]]:
        source, candidate, relation = seen.source, seen.candidate, seen.relation
        signals = []
        if relation is not None:
            reason = f"{relation.description}: an empty upstream empties its downstreams"
            weight = round(LINEAGE_WEIGHT / relation.hops, 4)
            signals.append(Signal(name="lineage", contribution=weight, reason=reason))
        signals += shared_domain(source, candidate, DOMAIN_WEIGHT)
        if candidate.platform == source.platform:
            reason = f"loaded on the same platform {source.platform}"
            signals.append(
                Signal(name="same_platform", contribution=PLATFORM_WEIGHT, reason=reason)
            )
        return signals, {}  # no field to map


def _row_counts(facts: IncidentFacts) -> tuple[list[int], list[int]]:
    """Row counts of the source history's normal snapshots and of its labelled failures."""
    if facts.history is None:
        return [], []
    report = backtest(RowCountMinControl(), [facts.history])
    counted = [(o.rows_scanned, o.labelled_failure) for o in report.per_snapshot if o.evaluable]
    normal = [rows or 0 for rows, labelled in counted if not labelled]
    failed = [rows or 0 for rows, labelled in counted if labelled]
    return normal, failed
