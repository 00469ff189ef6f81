"""``lessons``: the lessons in the store, one line each; ``lessons show``: one lesson's page.

A lesson is a glossary term under ``reflex.lessons`` (DESIGN.md §2). Its page is the term's
definition, which Reflex renders (:mod:`reflex_actions.report.lesson_page`) and a steward may
edit in DataHub: ``show`` prints that stored text as DataHub shows it, never a second rendering.
"""

from __future__ import annotations

from typing import Any

import click
from datahub.metadata.schema_classes import GlossaryTermInfoClass, StructuredPropertiesClass

from reflex_actions.bounded import excerpt
from reflex_actions.catalog.base import Catalog, CatalogError
from reflex_actions.cli.output import print_json, reports_bad_input
from reflex_actions.cli.store import with_catalog
from reflex_actions.handlers.lesson_store import load_lesson, structured_values, term_title
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.vocabulary import LESSONS_NODE, SCOPE, display_name


class ListOrShow(click.Group):
    """``lessons [OPTIONS]`` lists; ``lessons show URN`` shows one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["list", *args]
        return super().parse_args(ctx, args)


def terminal_text(text: str) -> str:
    """``text`` with every control character (an escape sequence could rewrite the terminal)
    shown as its escape, newlines and tabs kept."""
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


def _one_line(text: str) -> str:
    return terminal_text(" ".join(text.split()))


def scope_size(catalog: Catalog, lesson: Lesson) -> int:
    """Where its control runs once published (none once retired); before that, the scope a
    steward would approve (``reflex.scope``)."""
    if lesson.approved is not None and lesson.revision is None:
        return lesson.published_count
    return len(structured_values(catalog, lesson.urn, SCOPE))


def _summary(catalog: Catalog, urn: str) -> dict[str, Any] | None:
    """One lesson's listing entry (its error if it is unreadable), or None for a term under
    the node that holds no lesson."""
    try:
        lesson = load_lesson(catalog, urn)
    except CatalogError as error:
        return {"urn": urn, "error": str(error)}
    if lesson is None:
        return None
    return {
        "urn": urn,
        "title": term_title(catalog.get_aspect(urn, GlossaryTermInfoClass)),
        "state": lesson.state.value,
        "pattern": lesson.failure_pattern,
        "version": lesson.approved.number if lesson.approved else None,
        "draft": lesson.next_version if lesson.revision else None,
        "scope_size": scope_size(catalog, lesson),
        "scope_rule": lesson.approved.scope_rule.text()
        if lesson.approved and lesson.approved.scope_rule
        else None,
        "rollout": lesson.rollout.progress() if lesson.rollout else None,
        "recurrences": lesson.recurrence_count,
    }


def _version_text(entry: dict[str, Any]) -> str:
    """``v2``, ``v2+3`` while version 3 waits for approval, ``-`` before any approval."""
    text = f"v{entry['version']}" if entry["version"] else "-"
    return text + (f"+{entry['draft']}" if entry["draft"] else "")


#: Width of the state column: the longest state, PENDING_APPROVAL.
STATE_WIDTH = max(len(state.value) for state in LessonState)


def listing_lines(entries: list[dict[str, Any]]) -> list[str]:
    """The entries as aligned lines: state, pattern, version, scope size, recurrences, urn,
    title."""
    readable = [e for e in entries if "error" not in e]
    pattern_width = max((len(_one_line(e["pattern"])) for e in readable), default=0)
    lines = []
    for entry in entries:
        if "error" in entry:
            lines.append(
                f"{'UNREADABLE':<{STATE_WIDTH}}  {entry['urn']}  {_one_line(entry['error'])}"
            )
            continue
        lines.append(
            f"{entry['state']:<{STATE_WIDTH}}  {_one_line(entry['pattern']):<{pattern_width}}  "
            f"{_version_text(entry):<5} scope {entry['scope_size']:<3} "
            f"recurrences {entry['recurrences']:<3} "
            f"{entry['urn']}  {_one_line(entry['title'])}"
            + (f"  ({entry['rollout']})" if entry["rollout"] else "")
        )
    return lines


@click.group("lessons", cls=ListOrShow)
def lessons() -> None:
    """List the lessons in the store (state, pattern, version, scope, recurrences), or show one.

    `lessons [--json]` lists them (the same as `lessons list`); `lessons show URN [--json]`
    prints one lesson's page as its glossary term page in DataHub shows it.
    """


@lessons.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@reports_bad_input
@with_catalog("read")
def list_command(as_json: bool, catalog: Catalog) -> None:
    """List the lessons in the store, one line each."""
    entries = [e for urn in catalog.terms_under(LESSONS_NODE) if (e := _summary(catalog, urn))]
    if as_json:
        print_json(entries)
    elif not entries:
        click.echo("no lessons in the store")
    else:
        click.echo("\n".join(listing_lines(entries)))


def _properties(catalog: Catalog, urn: str) -> dict[str, list[str | float]]:
    """The term's structured properties (its workflow state), by qualified name."""
    aspect = catalog.get_aspect(urn, StructuredPropertiesClass)
    return {
        display_name(p.propertyUrn): list(p.values) for p in (aspect.properties if aspect else [])
    }


@lessons.command("show")
@click.argument("lesson_urn")
@click.option("--json", "as_json", is_flag=True, help="Print the page and the lesson as JSON.")
@reports_bad_input
@with_catalog("read")
def show_command(lesson_urn: str, as_json: bool, catalog: Catalog) -> None:
    """Print a lesson's page: its term's name, definition and structured properties."""
    lesson = load_lesson(catalog, lesson_urn)
    term = catalog.get_aspect(lesson_urn, GlossaryTermInfoClass)
    if lesson is None or term is None:
        raise CatalogError(f"no lesson {excerpt(lesson_urn)} in the store")
    properties = _properties(catalog, lesson_urn)
    if as_json:
        print_json(
            {
                "urn": lesson_urn,
                "name": term.name,
                "definition": term.definition,
                "properties": properties,
                "lesson": lesson.model_dump(mode="json"),
            }
        )
        return
    click.echo(f"# {_one_line(term.name or lesson_urn)}\n")
    click.echo(terminal_text(term.definition.rstrip()))
    if properties:
        click.echo("\nStructured properties:")
        for name, values in properties.items():
            click.echo(f"- {_one_line(name)}: {_one_line(', '.join(map(str, values)))}")
