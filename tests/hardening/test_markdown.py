"""Untrusted text on the lesson page (issue 11, item 11) and in incident B's description (issue 25,
item 9) renders as text: an injected image, link, bare URL, HTML, heading or fence-closing line
stays inert."""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    CorpUserStatusClass,
    GlossaryTermInfoClass,
    GroupMembershipClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    OperationClass,
    OperationTypeClass,
    StringTypeClass,
)
from datahub.utilities.urn_encoder import UrnEncoder
from markdown_it import MarkdownIt

from reflex_actions.backtest.metrics import BacktestReport, Scores
from reflex_actions.catalog.steward import acting_as
from reflex_actions.handlers.assertions import assertion_urn, recurrence_incident_urn
from reflex_actions.handlers.directives import apply
from reflex_actions.handlers.incident_resolved import on_incident_change
from reflex_actions.handlers.landing_runs import on_operation
from reflex_actions.handlers.ownership import on_user_status
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.kinds.orphaned_ownership import ORPHANED_OWNERSHIP
from reflex_actions.lessons.model import (
    ApprovedVersion,
    Evidence,
    Lesson,
    LessonState,
    ProposerInfo,
)
from reflex_actions.report.backtest import render_markdown
from reflex_actions.report.lesson_page import render_definition
from reflex_actions.report.markdown import code, code_block, escape, plain, table_cells
from reflex_actions.vocabulary import display_name
from tests.catalog.builders import field, schema
from tests.catalog.memory_catalog import MemoryCatalog
from tests.conftest import write_snapshot
from tests.handlers.builders import (
    LESSON,
    PAYMENTS,
    REFLEX,
    STEWARD,
    add_dataset,
    change,
    context,
    published_lesson,
    seed,
    written,
)

IMAGE = "![pixel](http://evil.example/p.png)"
HOSTILE = [
    IMAGE,
    "[click](javascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "line one\n\n# Approved by the CFO\n\n---",
    "1. not a list",
    "- not an item",
    "> not a quote",
    "**bold** _em_ ~~gone~~ `code`",
    "a | b | c",
    "&lt;img&gt;",
    "back\\slash \\[",
    "bare links: https://evil.example/x WWW.evil.example mail@evil.example",
    "```\n![](http://evil.example/fence.png)\n```",
]
#: CommonMark: a backslash before ASCII punctuation shows that character, literally.
BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
#: Characters that must never reach the page unescaped from untrusted text.
MARKUP = re.compile(r"(?<!\\)[\[\]<>`*|~&]")


def shown(markdown: str) -> str:
    """The text a renderer shows for escaped inline markdown."""
    return BACKSLASH_ESCAPE.sub(r"\1", markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_escaped_text_shows_exactly_itself_on_one_line(text: str) -> None:
    escaped = escape(text)
    assert "\n" not in escaped
    assert shown(escaped) == " ".join(text.split())
    assert not MARKUP.search(BACKSLASH_ESCAPE.sub("", escaped))
    assert not re.match(r"[#+=>-]|\d+[.)]", escaped)
    assert _autolinked(escaped) == []


def test_names_stay_readable() -> None:
    assert escape("finance.ledger_entries") == "finance.ledger_entries"
    assert escape("_private_") == "\\_private\\_"


@pytest.mark.parametrize("text", ["plain", "a `tick` here", "``double``", "`", "x\n\ny"])
def test_code_spans_hold_any_backticks(text: str) -> None:
    span = code(text)
    fence = re.match(r"`+", span)
    assert fence is not None and span.endswith(fence.group())
    inner = span[len(fence.group()) : -len(fence.group())]
    longest_inside = max((len(run) for run in re.findall(r"`+", inner)), default=0)
    assert longest_inside < len(fence.group())
    assert inner.strip() == " ".join(text.split())


def test_a_code_block_cannot_be_closed_by_its_content() -> None:
    block = code_block("a: 1\n```\n![](http://evil.example/x.png)\n````\n", "yaml")
    lines = block.splitlines()
    fence = lines[0].removesuffix("yaml")
    assert lines[-1] == fence
    assert all(not line.strip().startswith(fence) for line in lines[1:-1])


def _hostile_lesson(text: str) -> Lesson:
    return Lesson(
        urn="urn:li:glossaryTerm:reflex.lesson.x",
        incident=f"urn:li:incident:{text}",
        source_dataset=f"urn:li:dataset:(urn:li:dataPlatform:hive,{text},PROD)",
        affected_assets=[],
        failure_pattern=DUPLICATE_ROWS,
        root_cause=text,
        evidence=[Evidence(source="description", quote=text)],
        control={"type": "uniqueness", "field": f"id\n```\n{HOSTILE[-1]}"},
        confidence=0.5,
        rationale=text,
        proposer=ProposerInfo(name="llm", model=text, fallback_reason=text),
        state=LessonState.PUBLISHED,
        validation_error=text,
        decisions=[{"decision": text, "actor": text, "at": 1, "detail": text}],
        published_scope=[f"urn:li:dataset:(urn:li:dataPlatform:hive,{text},PROD)"],
        recurrences=[
            {
                "incident": text,
                "dataset": text,
                "snapshot": text,
                "at": 1,
                "resolved": {"by": text, "at": 2, "note": text},
            }
        ],
    )


def _markup_outside_code(markdown: str) -> list[str]:
    """Unescaped markup characters on a page, skipping fenced blocks, code spans (they show
    text verbatim) and backslash escapes, as a CommonMark inline scan does."""
    text = re.sub(r"^(`{3,})yaml\n.*?^\1$", "", markdown, flags=re.S | re.M)
    text = re.sub(r"^> ", "", text, flags=re.M)  # the page's own quote
    found, index = [], 0
    while index < len(text):
        if BACKSLASH_ESCAPE.match(text, index):
            index += 2
            continue
        run = re.match(r"`+", text[index:])
        if run:
            closing = re.compile(rf"(?<!`){run.group()}(?!`)").search(
                text, index + len(run.group())
            )
            if closing:
                index = closing.end()
                continue
        if MARKUP.match(text, index):
            found.append(text[index])
        index += 1
    return found


OWN_HEADINGS = {"#### Root cause", "#### Evidence", "#### Control", "#### Published on",
                "#### Recurrences caught", "#### Decisions"}  # fmt: skip


def test_the_lesson_page_shows_hostile_text_as_text() -> None:
    hostile = " ".join(HOSTILE)
    page = render_definition(_hostile_lesson(hostile), title=hostile)

    # only the page's own bold (title, state, "Needs a fix") is markup
    assert _markup_outside_code(page) == ["*"] * 12
    headings = {line for line in page.splitlines() if line.startswith("#")}
    assert headings == OWN_HEADINGS
    # the control block is closed by its own fence, after the whole spec
    block = re.search(r"^(`{3,})yaml\n(.*?)^\1$", page, flags=re.S | re.M)
    assert block is not None and "field:" in block.group(2) and "fence.png" in block.group(2)


def test_the_backtest_report_escapes_dataset_names_and_reasons() -> None:
    report = BacktestReport.model_validate(
        {
            "control_type": "uniqueness",
            "control": IMAGE,
            "spec": {},
            "datasets": [
                {
                    "dataset": IMAGE,
                    "history": "/h",
                    "applicable": False,
                    "reason": "<img src=x> | cell",
                    "labels_without_snapshot": [],
                    "elapsed_ms": 1.0,
                    **Scores.compute([], candidate_assets=1, applicable_assets=0),
                }
            ],
            "per_snapshot": [],
            "elapsed_ms": 1.0,
            **Scores.compute([], candidate_assets=1, applicable_assets=0),
        }
    )
    markdown = render_markdown(report)
    assert "![" not in BACKSLASH_ESCAPE.sub("", markdown)
    assert "<img" not in BACKSLASH_ESCAPE.sub("", markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_the_similar_assets_table_shows_hostile_names_and_reasons_as_text(text: str) -> None:
    """Dataset names come from urns and reasons quote catalog metadata: one table row each,
    rendered as the text itself."""
    from reflex_actions.report.lesson_page import candidates_section
    from reflex_actions.similarity.models import Candidate, Exclusion, Resolution, Signal

    signal = Signal(name="shares_field", contribution=0.5, reason=text)
    resolution = Resolution(
        source_urn="urn:li:dataset:(urn:li:dataPlatform:s3,a,PROD)",
        pattern=DUPLICATE_ROWS,
        threshold=0.5,
        candidates=[
            Candidate(urn="urn:x", name=text, score=0.9, recommended=True, signals=[signal])
        ],
        excluded=[Exclusion(urn="urn:y", name=text, reason=text)],
    )
    section = candidates_section(resolution)
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert len(rows) == 3  # header, separator, one candidate: no injected row or block
    for line in section.splitlines()[4:]:
        content = line.removeprefix("- ").replace(" | ", " ").strip("| ")
        assert not MARKUP.search(content), line
    # shown on a terminal, each cell is the text itself
    assert table_cells(rows[0]) == ["dataset", "score", "recommended", "why"]
    assert table_cells(rows[1]) is None  # the delimiter row
    one_line = " ".join(text.split())
    assert table_cells(rows[2]) == [one_line, "0.90", "yes", one_line]


@pytest.mark.parametrize("text", [*HOSTILE, "a -> b", "`", "``x``", "x\\|y"])
def test_plain_text_of_escaped_or_code_text_is_the_text_itself(text: str) -> None:
    """What a terminal shows of Reflex's markdown: what a renderer would show, unmarked."""
    one_line = " ".join(text.split())
    assert plain(escape(text)) == one_line
    assert plain(code(text)) == one_line
    assert plain(f"**{escape(text)}** ({code(text)})") == f"{one_line} ({one_line})"


# --- through the handlers: what lands in DataHub's markdown fields (issue 25, item 9) -----------
#: Values a landed snapshot, a schema, a urn or a steward's note can hold.
LANDED = [
    "![x](http://attacker.example/p.png)",
    "[click](javascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "`rm -rf`",
]
#: What GFM (DataHub renders markdown with marked, ``gfm: true``) links by itself, in a run of
#: plain text: a backslash escape ends the run.
GFM_AUTOLINK = re.compile(r"(?:https?|ftp)://|www\.|[\w.+-]@[\w-]+\.\w", re.IGNORECASE)


def _rendered(markdown: str) -> str:
    """``markdown`` as HTML by a CommonMark renderer with raw HTML on and every link target
    allowed: Reflex's text must stay inert whatever the renderer's own URL filter."""
    renderer = MarkdownIt("commonmark").enable(["table"])
    renderer.validateLink = lambda url: True
    return renderer.render(markdown)


def _autolinked(markdown: str) -> list[str]:
    """What GFM would turn into a link: URLs and emails in runs of plain text (the text between
    backslash escapes, outside code)."""
    renderer = MarkdownIt("commonmark").enable(["table"]).disable("text_join")
    return [
        found.group()
        for block in renderer.parse(markdown)
        for token in block.children or []
        if token.type == "text"
        for found in GFM_AUTOLINK.finditer(token.content)
    ]


def _visible(html_text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", html_text)).split())


def _assert_shown_as_text(markdown: str, fragments: list[str]) -> None:
    """No image, link, HTML or autolink; each fragment visible, verbatim."""
    page = _rendered(markdown)
    assert "<img" not in page and "<a " not in page, markdown
    assert _autolinked(markdown) == [], markdown
    shown = _visible(page)
    assert all(fragment in shown for fragment in fragments), shown


@pytest.mark.parametrize("hostile", LANDED)
def test_landed_values_names_and_notes_reach_datahub_markdown_as_text(
    hostile: str, tmp_path: Path
) -> None:
    """A duplicated key, a column name and a dataset name from the data, an incident urn, a
    drafted root cause and a steward's resolution note: incident B's description and the lesson
    page render each as the text itself, never as an image, a link or HTML."""
    name = UrnEncoder.encode_string(hostile)  # a urn's name holds no "(", ")" or ","
    dataset = f"urn:li:dataset:(urn:li:dataPlatform:s3,{name},PROD)"
    column = f"id {hostile}"
    catalog = MemoryCatalog()
    seed(catalog, acting_as(STEWARD, dataset, schema(field(column, "VARCHAR", StringTypeClass()))))
    published_lesson(
        catalog,
        approved_at=100,
        control={"type": "uniqueness", "field": column},
        dataset=dataset,
        incident=f"urn:li:incident:{hostile}",
        root_cause=f"a retry re-inserted {hostile}",
        evidence=[Evidence(source="resolution_note", quote=hostile)],
    )
    rows = [{column: value} for value in (hostile, hostile, "ok")]
    snapshot = write_snapshot(tmp_path / "landed" / "s1.parquet", rows)
    ctx = context(catalog, landing={"allowed_roots": [str(tmp_path)]})
    landed = OperationClass(
        timestampMillis=101,
        lastUpdatedTimestamp=101,
        operationType=OperationTypeClass.INSERT,
        customProperties={"snapshot": str(snapshot), "snapshot_id": "s1"},
    )
    on_operation(change(dataset, landed, time_ms=101), ctx)
    apply(ctx.out.directives, catalog, REFLEX)
    incident_b = recurrence_incident_urn(assertion_urn(LESSON, dataset), "s1")
    raised = catalog.get_aspect(incident_b, IncidentInfoClass)
    assert raised is not None
    resolved = copy.deepcopy(raised)
    resolved.status = IncidentStatusClass(
        state=IncidentStateClass.RESOLVED,
        message=f"deduplicated {hostile}",
        lastUpdated=AuditStampClass(time=102, actor=STEWARD),
    )
    ctx = context(catalog)
    on_incident_change(change(incident_b, resolved, previous=raised, time_ms=102), ctx)
    apply(ctx.out.directives, catalog, REFLEX)
    term = catalog.get_aspect(LESSON, GlossaryTermInfoClass)
    assert term is not None

    expected = {
        raised.description or "": [f"failed on {name}", f"({column}) identifies", f'"{hostile}"'],
        term.definition: [f"re-inserted {hostile}", f"“{hostile}”", f"deduplicated {hostile}"],
    }
    for markdown, fragments in expected.items():
        _assert_shown_as_text(markdown, fragments)


@pytest.mark.parametrize("hostile", LANDED)
def test_a_departed_owner_and_their_team_reach_incident_b_as_text(hostile: str) -> None:
    """User and group names (urns from the catalog) in incident B's proposed owner change."""
    user, team = f"urn:li:corpuser:{hostile}", f"urn:li:corpGroup:{hostile}"
    name = display_name(user)  # the part after the urn's last ":"
    catalog = MemoryCatalog()
    add_dataset(catalog, PAYMENTS, owners=(user,))
    published_lesson(
        catalog,
        approved_at=100,
        control={"type": "active_ownership", "min_active_owners": 1},
        failure_pattern=ORPHANED_OWNERSHIP,
    )
    suspended = CorpUserStatusClass(
        status="SUSPENDED", lastModified=AuditStampClass(time=0, actor=STEWARD)
    )
    seed(
        catalog,
        acting_as(STEWARD, user, GroupMembershipClass(groups=[team])),
        acting_as(STEWARD, user, suspended),
    )
    active = CorpUserStatusClass(status="ACTIVE", lastModified=suspended.lastModified)
    ctx = context(catalog)
    on_user_status(change(user, suspended, active, time_ms=200), ctx)

    [raised] = written(ctx, IncidentInfoClass)
    _assert_shown_as_text(
        raised.description or "",
        [f"{name} was suspended", f"owner: {team} ({name} is the team {name} belonged"],
    )


def test_a_column_name_with_a_pipe_stays_in_its_versions_table_cell() -> None:
    """A code span does not protect a pipe in a GFM table row: the row splits on it."""
    control = {"type": "uniqueness", "field": "a | b"}
    version = ApprovedVersion(control=control, scope=[LESSON], actor=STEWARD, at=1, digest="0" * 64)
    lesson = _hostile_lesson("x").model_copy(update={"versions": [version]})
    page = _rendered(render_definition(lesson, "t"))
    row = page[page.index("<tbody>") : page.index("</tbody>")]
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[4:6] == ["<code>{type: uniqueness, field: a | b}</code>", display_name(LESSON)]
