"""A lesson kind from outside ``reflex_actions`` closes the whole embedded loop.

``tests.plugin_kinds.empty_table`` is installed only through the ``reflex_actions.kinds`` entry
point (``plugin_installed``); the real pipeline then drafts its lesson from an incident's words,
backtests it, publishes it and raises incident B when an empty load lands on another dataset.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from reflex_actions.demo.estate import DATASETS, dataset_urn
from reflex_actions.demo.history import LANDING_DAY, LANDING_FOLDER, arrow_schema
from reflex_actions.demo.run import Demo
from reflex_actions.handlers.assertions import assertion_urn
from reflex_actions.lessons.model import LessonState
from reflex_actions.registry import ENTRY_POINT_GROUP
from reflex_actions.vocabulary import APPROVAL, ROOT_CAUSE_STATUS
from tests.kinds.conftest import ENTRY_POINT
from tests.loop.store import (
    active_incident,
    demo_with_resolved,
    incidents_b,
    land,
    store_of,
    stored_lesson,
)

REPO = Path(__file__).resolve().parents[2]
EMPTY_INCIDENT = "urn:li:incident:reflex-test-empty-revenue"
REVENUE = dataset_urn("finance.daily_revenue")
LEDGER = dataset_urn("finance.ledger_entries")
GL_BALANCES = dataset_urn("finance.gl_balances")
NOTE = (
    "The ledger export now fails loudly when it writes no rows; finance.daily_revenue was "
    "reloaded for 2026-09-14."
)
#: dataset -> snapshot id -> rows, and the labelled failures: each history has one empty load
#: labelled; gl_balances also has an unlabelled empty day (a false alarm)
HISTORIES = {
    "finance.daily_revenue": ({"2026-09-13": 3, "2026-09-14": 0, "2026-09-15": 3}, ["2026-09-14"]),
    "finance.ledger_entries": ({"2026-09-13": 5, "2026-09-14": 0, "2026-09-15": 5}, ["2026-09-14"]),
    "finance.gl_balances": (
        {"2026-09-13": 2, "2026-09-14": 0, "2026-09-15": 2, "2026-09-16": 0},
        ["2026-09-14"],
    ),
}


def write_table(path: Path, dataset: str, rows: int) -> Path:
    """A snapshot of ``dataset`` with its estate schema and ``rows`` rows of nulls."""
    schema = arrow_schema(DATASETS[dataset])
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [pa.nulls(rows, field.type) for field in schema]
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), path)
    return path


def empty_revenue_incident() -> MetadataChangeProposalWrapper:
    return active_incident(
        EMPTY_INCIDENT,
        REVENUE,
        "finance.daily_revenue is empty",
        "The finance dashboard showed no revenue for 2026-09-14: "
        "finance.daily_revenue had zero rows after the ledger export failed silently.",
    )


def resolved_empty_revenue(workdir: Path) -> Demo:
    """The demo estate plus the empty-table incident and histories, incident A resolved."""
    workdir.mkdir()
    for dataset, (snapshots, failures) in HISTORIES.items():
        for snapshot_id, rows in snapshots.items():
            write_table(workdir / "snapshots" / dataset / f"{snapshot_id}.parquet", dataset, rows)
        labels = {"failures": [{"snapshot": f, "incident": EMPTY_INCIDENT} for f in failures]}
        (workdir / "snapshots" / dataset / "labels.yaml").write_text(yaml.safe_dump(labels))
    return demo_with_resolved(workdir, empty_revenue_incident(), NOTE)


def landed(demo: Demo, dataset: str, rows: int) -> None:
    name = dataset.split(",")[1]
    folder = demo.workdir / "snapshots" / LANDING_FOLDER / name
    path = write_table(folder / f"{LANDING_DAY.isoformat()}.parquet", name, rows)
    land(demo, dataset, path, LANDING_DAY.isoformat())
    demo.react()


@pytest.mark.usefixtures("plugin_installed")
def test_a_kind_from_another_package_closes_the_loop(tmp_path: Path) -> None:
    demo = resolved_empty_revenue(tmp_path / "demo")
    store = store_of(demo.workdir)
    try:
        lesson = demo.lesson(EMPTY_INCIDENT)
        assert (lesson.failure_pattern, lesson.proposer.name) == ("empty_table", "deterministic")
        assert lesson.control == {"type": "row_count_min", "min_rows": 1}
        assert lesson.root_cause == (
            "A load left finance.daily_revenue without its rows and nothing noticed."
        )
        quoted = {(e.source, e.quote) for e in lesson.evidence}
        assert ("title", "finance.daily_revenue is empty") in quoted
        assert (
            "resolution_note",
            "The ledger export now fails loudly when it writes no rows;"
            " finance.daily_revenue was reloaded for 2026-09-14.",
        ) in quoted
        assert (
            "history",
            "the 2 normal snapshots hold 3 rows or more; the 1 labelled failure(s) hold 0",
        ) in quoted

        demo.steward_sets(lesson.urn, ROOT_CAUSE_STATUS, "CONFIRMED")
        lesson = demo.lesson(EMPTY_INCIDENT)
        assert lesson.state is LessonState.PENDING_APPROVAL
        rows = {
            match[1]: (match[2], match[3], match[4])
            for match in re.finditer(
                r"^\| ([\w.]+) \| (\d\.\d\d) \| (yes|no) \| (.+) \|$", lesson.report, re.M
            )
        }
        assert rows["finance.ledger_entries"] == (
            "0.70",
            "yes",
            "upstream of the source (1 hop): an empty upstream empties its downstreams; "
            "shares domain finance; loaded on the same platform snowflake; not yet covered",
        )
        assert rows["finance.gl_balances"][:2] == ("0.50", "yes")
        assert "shares upstream finance.ledger_entries" in rows["finance.gl_balances"][2]
        assert rows["finance.fx_rates"][:2] == ("0.30", "no")
        assert (
            "**Recommended scope** (4 datasets): precision 75%, recall 100%, 3 labelled failures "
            "caught, 1 false alarm, 0 missed, 0 snapshots not evaluable."
        ) in lesson.report
        assert "No history for: finance.payments." in lesson.report

        demo.steward_sets(lesson.urn, APPROVAL, "APPROVED")
        lesson = demo.lesson(EMPTY_INCIDENT)
        assert lesson.state is LessonState.PUBLISHED
        assert set(lesson.published_scope) >= {REVENUE, LEDGER, GL_BALANCES}

        landed(demo, GL_BALANCES, rows=4)  # a normal load: the control passes
        landed(demo, LEDGER, rows=0)  # the export failed again, elsewhere
        assert incidents_b(store, GL_BALANCES) == {}
        [(incident, info)] = incidents_b(store, LEDGER).items()
        assert info.source is not None
        assert info.source.sourceUrn == assertion_urn(lesson.urn, LEDGER)
        assert f"learned from incident {EMPTY_INCIDENT}" in (info.description or "")
        assert "1 violation(s) in 0 row(s)" in (info.description or "")
        [recurrence] = stored_lesson(store, lesson.urn).recurrences
        assert (recurrence.incident, recurrence.dataset) == (incident, LEDGER)
        assert recurrence.snapshot == LANDING_DAY.isoformat()
    finally:
        demo.catalog.close()


def test_without_the_plugin_the_same_incident_is_unknown(tmp_path: Path) -> None:
    demo = resolved_empty_revenue(tmp_path / "demo")
    try:
        lesson = demo.lesson(EMPTY_INCIDENT)
        assert (lesson.failure_pattern, lesson.control) == ("unknown", None)
    finally:
        demo.catalog.close()


def test_the_package_never_names_the_plugin_kind() -> None:
    found = subprocess.run(
        ["grep", "-rlE", "empty_table|row_count_min", "reflex_actions/"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (found.returncode, found.stdout) == (1, "")


def test_the_readme_shows_the_whole_kind_and_its_entry_point() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Adding an incident class\n", 1)[1].split("\n## ", 1)[0]
    [module] = re.findall(r"```python\n(.*?)```", section, re.S)
    assert module == (REPO / "tests/plugin_kinds/empty_table.py").read_text(encoding="utf-8")
    entry_point = f'empty_table = "{ENTRY_POINT.split(" = ")[1]}"'
    assert f'[project.entry-points."{ENTRY_POINT_GROUP}"]\n{entry_point}\n' in section
