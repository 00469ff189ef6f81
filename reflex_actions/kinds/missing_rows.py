"""Missing rows: a load that wrote far fewer rows than it should have (``volume``).

The control judges a snapshot's row count against absolute bounds (``min_rows``, ``max_rows``)
and, with ``max_drop``, against the median of the dataset's previous ``window`` counts: at most
that share below it. The earlier counts come from the history in a backtest (each snapshot
against the ones before it), from the assertion's earlier runs on landing, and from
``--baseline-counts`` on the command line; without any, only the absolute bounds judge, and the
result says so. A violation is a row short of the lower bound (or beyond the upper one).

Words: missing rows, a partial load, half the rows, a dropped row count. Evidence: the incident
snapshot's count against the trailing median of the normal ones; ``max_drop`` is learned from the
earlier normal snapshots only (no peeking), with headroom, and must still catch the incident.
"""

from __future__ import annotations

import math
import re
import statistics

from reflex_actions.backtest.history import (
    History,
    row_counts,
    split_for_learning,
)
from reflex_actions.controls.volume import VolumeControl
from reflex_actions.kinds.base import LearnedFinding, LessonKind, Trigger, learned_draft
from reflex_actions.lessons.facts import IncidentFacts
from reflex_actions.lessons.key_discovery import failure_snapshots
from reflex_actions.lessons.model import Evidence, IncidentText, LessonDraft
from reflex_actions.lessons.words import unique
from reflex_actions.vocabulary import display_name

MISSING_ROWS = "missing_rows"
#: The smallest share a learned ``max_drop`` leaves above the largest normal drop.
HEADROOM = 0.1


# --- evidence from the history -------------------------------------------------------------------
def _drops(counts: list[int], window: int) -> list[float]:
    """Each count's drop below the median of the ``window`` counts before it (first skipped)."""
    drops = []
    for index in range(1, len(counts)):
        median = statistics.median(counts[max(0, index - window) : index])
        drops.append(1 - counts[index] / median if median else 0.0)
    return drops


def discover_volume(history: History, incident_urn: str, window: int = 7) -> LearnedFinding | None:
    """A relative rule that the learning part of the history keeps and the incident breaks:
    ``max_drop`` the largest normal drop plus headroom, rounded up to a tenth, below the
    incident's drop (each against the median of the snapshots before it, in time order)."""
    failures = set(failure_snapshots(history, incident_urn))
    counts = row_counts(history)
    if not failures or not counts:
        return None
    split = split_for_learning(history, failures, list(counts))
    learned = set(split.normal) | set(split.failures)
    ordered = [sid for sid in counts if sid in learned]  # in snapshot-id (time) order
    normal_counts = [counts[sid] for sid in ordered if sid not in failures]
    normal_drops = _drops(normal_counts, window)
    incident_drops = []
    for sid in ordered:
        if sid in failures:
            before = [counts[o] for o in ordered if o < sid and o not in failures][-window:]
            if before and statistics.median(before):
                incident_drops.append(1 - counts[sid] / statistics.median(before))
    if not incident_drops or not normal_drops:
        return None
    max_drop = math.ceil((max(max(normal_drops), 0.0) + HEADROOM) * 10) / 10
    if not max_drop < min(incident_drops) or max_drop >= 1:
        return None
    failed = ", ".join(sorted(failures & set(counts)))
    fact = (
        f"each of the {len(normal_counts)} normal snapshots learned from lies at most "
        f"{max(max(normal_drops), 0.0):.0%} below the median of the {window} before it; "
        f"{failed} lies {min(incident_drops):.0%} below"
    )
    control = {"type": "volume", "max_drop": max_drop, "window": window}
    return LearnedFinding(control, fact, split)


# --- the kind ------------------------------------------------------------------------------------
VOLUME_WORDS = re.compile(
    r"\b(missing rows|partial(?:ly)? loads?|partial(?:ly)? loaded|half (?:of )?the rows|"
    r"(?:fewer|lost|dropped) rows|rows (?:were |went )?(?:lost|missing|dropped)|"
    r"row ?counts? (?:dropped|fell|halved|collapsed)|truncated (?:loads?|tables?))\b",
    re.IGNORECASE,
)


class MissingRowsKind(LessonKind):
    pattern = MISSING_ROWS
    title = "A load with far fewer rows than usual"
    incident_words = VOLUME_WORDS
    controls = (VolumeControl,)
    #: landed snapshots are counted; a new profile's rowCount is judged (on its event, and on
    #: the schedule for a profile whose event was missed)
    triggers = frozenset({Trigger.LANDED_DATA, Trigger.ASPECT_CHANGE, Trigger.SCHEDULE})
    key_signals = False  # a row count does not depend on which fields are keys

    def draft(
        self, text: IncidentText, facts: IncidentFacts, evidence: list[Evidence]
    ) -> LessonDraft:
        name = display_name(facts.source.urn) if facts.source else "the dataset"
        finding = discover_volume(facts.history, text.urn) if facts.history else None
        return learned_draft(
            self.pattern,
            unique(evidence),
            finding,
            found=(
                f"A partial load wrote far fewer rows than usual to {name}, and nothing "
                "compared the count with the loads before it.",
                "The history shows the incident's count dropping far more below the "
                "trailing median than any normal load did.",
            ),
            not_found=(
                f"A load wrote far fewer rows than usual to {name}.",
                "No history separates the incident's row count from the normal ones: a steward "
                "must set the bounds (min_rows, or max_drop against the last loads).",
            ),
        )
