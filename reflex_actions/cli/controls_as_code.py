"""Controls as code: ``export``, ``diff`` and ``propose`` a folder of lesson files.

``export DIR`` writes each published lesson's version in force as one YAML file, stable (keys in
a fixed order, sorted lists, nothing of the export's own time) so a folder under version control
shows a reviewed change as a plain diff. ``diff DIR`` says how the folder differs from the store.
``propose DIR`` enters a reviewed change the only way a steward's change enters: it writes the
file's ``reflex.controlSpec`` and ``reflex.scope`` on the lesson term as the steward, exactly as
the DataHub UI does; Reflex then drafts, validates and backtests the next version and waits for
an approver. A folder never publishes anything, and never writes Reflex's own state.

Lesson files are untrusted input: each is read bounded (no YAML anchors, a size cap), unknown
keys are refused, and a file is taken only for the lesson version it was exported from (a file
reviewed against version 2 while the store moved on to 3 is stale).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import click
import yaml
from datahub.metadata.schema_classes import GlossaryTermInfoClass
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reflex_actions.bounded import BoundedYamlError, excerpt, load_bounded_yaml, shorten
from reflex_actions.catalog.base import Catalog
from reflex_actions.cli.catalog import (
    StewardInputError,
    known_dataset,
    known_lesson,
    steward_urn,
)
from reflex_actions.cli.lessons import terminal_text
from reflex_actions.cli.output import EXIT_CHECK_FAILED, print_json, reports_bad_input
from reflex_actions.cli.store import with_catalog
from reflex_actions.controls import control_spec, parse_control_spec, spec_line
from reflex_actions.errors import ControlSpecError, ReflexError
from reflex_actions.handlers.lesson_store import (
    LESSON_PREFIX,
    load_lesson,
    term_title,
)
from reflex_actions.lessons.model import ApprovedVersion, Lesson, LessonState
from reflex_actions.lessons.validation import parse_steward_control
from reflex_actions.safe_files import Folder
from reflex_actions.times import iso
from reflex_actions.vocabulary import CONTROL_SPEC, LESSONS_NODE, SCOPE
from reflex_actions.wording import plural

#: Longest lesson file read (characters); an exported one is well under a kilobyte or two.
MAX_FILE_CHARS = 64 * 1024
#: Deepest nesting in a lesson file (the control nests two levels below the top).
MAX_FILE_DEPTH = 8
#: Most lesson files read from one folder.
MAX_FILES = 10_000
#: Longest urn accepted in a file (DataHub's own limit on a key is far lower in practice).
MAX_URN_CHARS = 1000
#: Most problems listed in one refusal.
MAX_PROBLEMS = 10
SUFFIX = ".yaml"
#: A lesson id that is a safe file name as it is: no path separator, no leading dot.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
HEADER = (
    "# A published Reflex lesson (its version in force). Edit `control` or `scope` and run\n"
    "# `datahub-reflex propose DIR` to draft the next version for approval; the other fields\n"
    "# are a record of this version and are not proposed.\n"
)

PropertyValues = dict[str, list[str | float]]
Urn = Annotated[str, Field(min_length=1, max_length=MAX_URN_CHARS)]


class BacktestFigures(BaseModel):
    """What the backtest of the version found on the scope it recommended."""

    model_config = ConfigDict(extra="forbid")

    precision: float | None
    recall: float | None
    true_positives: int
    false_positives: int
    snapshots: int


class LessonFile(BaseModel):
    """One lesson file; its fields in the order they are written."""

    model_config = ConfigDict(extra="forbid")

    lesson: Urn
    title: str = ""
    kind: str = ""
    root_cause: str = ""
    control: dict[str, Any]
    #: bounded by the file's size (``MAX_FILE_CHARS``), below what a lesson's record holds
    scope: list[Urn]
    version: int = Field(ge=1)
    approved_by: str | None = None
    approved_at: str | None = None
    backtest: BacktestFigures | None = None
    state: str = ""


class LessonFileError(ReflexError):
    """A lesson folder or file that cannot be read as lessons; the message names the file."""


def file_name(lesson_urn: str) -> str:
    """The file a lesson is exported to: its id, or a hash of its urn when the id is not a
    safe file name (so a name never leads out of the folder)."""
    lesson_id = lesson_urn.removeprefix(LESSON_PREFIX)
    if lesson_id == lesson_urn or not _SAFE_NAME.fullmatch(lesson_id):
        lesson_id = hashlib.sha1(lesson_urn.encode()).hexdigest()[:16]
    return lesson_id + SUFFIX


def lesson_file(lesson: Lesson, approved: ApprovedVersion, title: str) -> LessonFile:
    """The file of the lesson's version in force."""
    figures = None
    if approved.backtest is not None:
        scores = approved.backtest.scope
        figures = BacktestFigures(
            precision=scores.precision,
            recall=scores.recall,
            true_positives=scores.true_positives,
            false_positives=scores.false_positives,
            snapshots=scores.coverage.snapshots,
        )
    return LessonFile(
        lesson=lesson.urn,
        title=title,
        kind=lesson.failure_pattern,
        root_cause=lesson.root_cause,
        control=approved.control,
        scope=sorted(set(approved.scope)),
        version=approved.number,
        approved_by=approved.actor,
        approved_at=iso(approved.at),
        backtest=figures,
        state=lesson.state.value,
    )


def render(file: LessonFile) -> str:
    """The file's text: the same lesson version always renders to the same bytes."""
    body = yaml.safe_dump(
        file.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=100
    )
    return HEADER + body


def _problem(path: Path, error: ValidationError) -> str:
    """The first invalid field of a file, named without its value."""
    first = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "file"
    if first["type"] == "extra_forbidden":
        return f"{path.name}: unknown key {excerpt(where)}"
    return f"{path.name}: {shorten(where)}: {shorten(first['msg'], 200)}"


def read_lesson_file(path: Path) -> LessonFile:
    """One lesson file, bounded and strict; its control must be a valid control spec."""
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_FILE_CHARS + 1)
        data = load_bounded_yaml(text, path.name, MAX_FILE_CHARS, MAX_FILE_DEPTH)
    except (OSError, UnicodeDecodeError, BoundedYamlError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise LessonFileError(f"cannot read {path.name}: {reason}") from None
    if not isinstance(data, dict):
        raise LessonFileError(f"{path.name} is not a lesson file (a mapping with `lesson`)")
    try:
        file = LessonFile.model_validate(data)
    except ValidationError as error:
        raise LessonFileError(_problem(path, error)) from None
    try:
        file.control = control_spec(parse_control_spec(file.control))
    except ControlSpecError as error:
        raise LessonFileError(f"{path.name}: control: {error}") from None
    return file


def read_folder(folder: Path) -> dict[Path, LessonFile]:
    """Every ``*.yaml`` lesson file directly in ``folder``, by path, in name order; a lesson
    named by two files is refused (which one would be the reviewed one?)."""
    if not folder.is_dir():
        raise LessonFileError(f"no folder {excerpt(str(folder))}")
    paths = sorted(p for p in folder.iterdir() if p.suffix == SUFFIX and p.is_file())
    if len(paths) > MAX_FILES:
        raise LessonFileError(f"{folder} holds {len(paths)} lesson files; at most {MAX_FILES}")
    files: dict[Path, LessonFile] = {}
    named: dict[str, Path] = {}
    for path in paths:
        file = read_lesson_file(path)
        if file.lesson in named:
            raise LessonFileError(
                f"{named[file.lesson].name} and {path.name} are both lesson "
                f"{excerpt(file.lesson)}: keep one"
            )
        named[file.lesson] = path
        files[path] = file
    return files


@dataclass(frozen=True)
class Comparison:
    """How one lesson file differs from its lesson's version in force in the store."""

    path: Path | None
    lesson: str
    #: the lesson as stored, if the file can be compared with it
    stored: Lesson | None = None
    #: why the file cannot be proposed (unknown lesson, not published, stale, a draft
    #: waiting), or None
    problem: str | None = None
    #: the file's control where it differs from the version in force's
    control: dict[str, Any] | None = None
    previous_control: dict[str, Any] | None = None
    scope_added: tuple[str, ...] = ()
    scope_removed: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        return bool(
            self.problem or self.control is not None or self.scope_added or self.scope_removed
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "lesson": self.lesson,
            "file": self.path.name if self.path else None,
            "problem": self.problem,
            "control": None
            if self.control is None
            else {"from": self.previous_control, "to": self.control},
            "scope_added": list(self.scope_added),
            "scope_removed": list(self.scope_removed),
        }

    def lines(self) -> list[str]:
        where = f"{self.path.name}  " if self.path else ""
        head = f"{where}{self.lesson}"
        if self.problem:
            return [terminal_text(f"{head}: {self.problem}")]
        lines = [head]
        if self.control is not None:
            lines.append(f"  control: {_line(self.previous_control)} -> {_line(self.control)}")
        lines += [f"  scope + {urn}" for urn in self.scope_added]
        lines += [f"  scope - {urn}" for urn in self.scope_removed]
        return [terminal_text(line) for line in lines]


def _line(control: dict[str, Any] | None) -> str:
    try:
        return spec_line(control or {})
    except ControlSpecError:  # a stored control whose type is gone since
        return excerpt(control)


def compare(catalog: Catalog, path: Path, file: LessonFile) -> Comparison:
    """The file against the store: what it changes, or why it cannot change anything."""
    try:
        lesson = known_lesson(catalog, file.lesson)
    except StewardInputError as error:
        return Comparison(path, file.lesson, problem=str(error))
    approved = lesson.approved
    if approved is None or not lesson.in_force:
        return Comparison(
            path, file.lesson, problem=f"the lesson is {lesson.state.value}, not published"
        )
    if file.version != approved.number:
        return Comparison(
            path,
            file.lesson,
            problem=f"stale: the file is version {file.version}, the version in force is "
            f"{approved.number}; export again and review the change on it",
        )
    scope = set(file.scope)
    comparison = Comparison(
        path,
        file.lesson,
        stored=lesson,
        control=None if file.control == approved.control else file.control,
        previous_control=approved.control,
        scope_added=tuple(sorted(scope - set(approved.scope))),
        scope_removed=tuple(sorted(set(approved.scope) - scope)),
    )
    if comparison.differs and lesson.state is LessonState.PENDING_APPROVAL:
        return Comparison(
            path,
            file.lesson,
            problem=f"version {lesson.next_version} is waiting for approval: approve or "
            "reject it before proposing another",
        )
    return comparison


def exported_lessons(catalog: Catalog) -> list[tuple[Lesson, ApprovedVersion, str]]:
    """The lessons with a version in force, each with that version and its title."""
    found = []
    for urn in catalog.terms_under(LESSONS_NODE):
        lesson = load_lesson(catalog, urn)
        if lesson is None or lesson.approved is None or not lesson.in_force:
            continue
        title = term_title(catalog.get_aspect(urn, GlossaryTermInfoClass))
        found.append((lesson, lesson.approved, title))
    return found


@click.command("export")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the files written as JSON.")
@reports_bad_input
@with_catalog("read")
def export_command(folder: Path, as_json: bool, catalog: Catalog) -> None:
    """Write each published lesson as one reviewable YAML file in FOLDER (created if needed).

    Exporting the same store twice writes the same bytes; other files in FOLDER are left as
    they are; a lesson file that is a symlink, or not a regular file, refuses the export before
    any file is written."""
    exported = exported_lessons(catalog)
    try:
        with Folder(folder, create=True) as target:
            for lesson, _, _ in exported:
                target.check_file(file_name(lesson.urn))
            for lesson, approved, title in exported:
                text = render(lesson_file(lesson, approved, title))
                target.write_file(file_name(lesson.urn), text)
    except OSError as error:
        raise LessonFileError(f"cannot write to {excerpt(str(folder))}: {error.strerror}") from None
    written = [
        {"lesson": lesson.urn, "file": str(folder / file_name(lesson.urn))}
        for lesson, _, _ in exported
    ]
    if as_json:
        print_json({"folder": str(folder), "written": written})
    else:
        for entry in written:
            click.echo(f"{entry['file']}  {entry['lesson']}")
        click.echo(f"{plural(len(written), 'published lesson')} exported to {folder}")


def _comparisons(catalog: Catalog, folder: Path) -> list[Comparison]:
    """Each file compared with the store, then each published lesson no file names."""
    files = read_folder(folder)
    found = [compare(catalog, path, file) for path, file in files.items()]
    named = {file.lesson for file in files.values()}
    found += [
        Comparison(None, lesson.urn, problem="published, but no file in the folder")
        for lesson, _, _ in exported_lessons(catalog)
        if lesson.urn not in named
    ]
    return found


@click.command("diff")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@reports_bad_input
@with_catalog("read")
def diff_command(folder: Path, as_json: bool, catalog: Catalog) -> None:
    """Show how the lesson files in FOLDER differ from the store's published lessons; exit 1
    if they differ, 0 if not.

    Only what a folder can propose is compared (control, scope) and whether each file is for
    the version in force; the version, approver and backtest fields are a record."""
    differences = [c for c in _comparisons(catalog, folder) if c.differs]
    if as_json:
        print_json({"differs": bool(differences), "lessons": [c.as_json() for c in differences]})
    elif differences:
        click.echo("\n".join(line for c in differences for line in c.lines()))
    else:
        click.echo(f"{folder} matches the store's published lessons")
    if differences:
        raise SystemExit(EXIT_CHECK_FAILED)


def _proposal(catalog: Catalog, lesson: Lesson, file: LessonFile) -> PropertyValues:
    """The structured properties a steward's edit of this lesson writes, validated as Reflex
    will validate them."""
    for urn in file.scope:
        known_dataset(catalog, urn)
    source = catalog.dataset(lesson.source_dataset) if lesson.source_dataset else None
    line = spec_line(file.control)
    try:
        parse_steward_control(line, lesson.failure_pattern, source, catalog)
    except ControlSpecError as error:
        raise StewardInputError(f"control: {error}") from None
    return {CONTROL_SPEC: [line], SCOPE: sorted(set(file.scope))}


@click.command("propose")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--as", "actor", required=True, help="The steward proposing (user name or urn).")
@click.option("--json", "as_json", is_flag=True, help="Print what was proposed as JSON.")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def propose_command(folder: Path, actor: str, as_json: bool, catalog: Catalog) -> None:
    """Propose each changed lesson file in FOLDER as its lesson's next version.

    Writes the file's reflex.controlSpec and reflex.scope on the lesson as the steward, as the
    DataHub UI does; Reflex drafts, backtests and asks for approval, and the version in force
    runs until an approver approves. Every file is checked first: if one cannot be proposed,
    nothing is written."""
    files = read_folder(folder)
    proposals: list[tuple[Comparison, PropertyValues]] = []
    problems: list[str] = []
    for path, file in files.items():
        comparison = compare(catalog, path, file)
        try:
            if comparison.problem:
                raise StewardInputError(comparison.problem)
            if comparison.differs and comparison.stored is not None:
                proposals.append((comparison, _proposal(catalog, comparison.stored, file)))
        except StewardInputError as error:
            problems.append(f"{path.name}: {error}")
    if problems:
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"and {len(problems) - MAX_PROBLEMS} more")
        raise StewardInputError("nothing proposed; " + "; ".join(shown))
    for comparison, values in proposals:
        catalog.set_structured_properties(comparison.lesson, values, steward_urn(actor))
    if as_json:
        print_json(
            {
                "proposed": [c.as_json() for c, _ in proposals],
                "actor": steward_urn(actor),
            }
        )
    elif not proposals:
        click.echo(f"nothing to propose: {folder} matches the store's published lessons")
    else:
        for comparison, _ in proposals:
            click.echo("\n".join(comparison.lines()))
        click.echo(
            f"{plural(len(proposals), 'lesson')} proposed by {steward_urn(actor)}: Reflex drafts "
            "and backtests each next version, which runs once an approver approves it"
        )
