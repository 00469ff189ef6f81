"""Store commands: ``init``, ``load`` and the ``steward`` actions for the embedded store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import click
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.source.file import read_metadata_file
from datahub.metadata.schema_classes import (
    AuditStampClass,
    CorpUserInfoClass,
    CorpUserStatusClass,
)
from datahub.utilities.urns.dataset_urn import DatasetUrn
from datahub.utilities.urns.error import InvalidUrnError

from reflex_actions.bounded import excerpt, shorten
from reflex_actions.catalog.base import Catalog
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.ingestion import landed_operation
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import acting_as, resolve_incident
from reflex_actions.catalog.validation import steward_assignment
from reflex_actions.cli.output import print_json, reports_bad_input
from reflex_actions.cli.store import with_catalog
from reflex_actions.errors import ReflexError
from reflex_actions.handlers.lesson_store import load_lesson
from reflex_actions.handlers.ownership import SUSPENDED
from reflex_actions.lessons.model import Lesson, LessonState
from reflex_actions.snapshots import FORMATS_BY_SUFFIX
from reflex_actions.times import now_ms
from reflex_actions.vocabulary import LIFECYCLE, VERSION, display_name
from reflex_actions.wording import plural


@click.command("init")
@reports_bad_input
@with_catalog("create")
def init_command(catalog: Catalog) -> None:
    """Create Reflex's structured properties and the lessons glossary node (idempotent)."""
    mcps = bootstrap_mcps()
    catalog.emit(mcps)
    click.echo(
        f"initialized: {plural(len(mcps), 'definition')} written (unchanged ones are left as "
        "they are)"
    )


class MetadataFile(NamedTuple):
    path: Path
    mcps: list[MetadataChangeProposalWrapper]


def _metadata_file(ctx: click.Context, param: click.Parameter, path: Path) -> MetadataFile:
    """The metadata file's MCPs, read before the store is opened (or created): a file that
    cannot be loaded leaves no new store behind."""
    try:
        records = list(read_metadata_file(path))
    except Exception as error:
        raise click.BadParameter(
            f"cannot read metadata file {path}: {shorten(str(error), 200)}", ctx=ctx, param=param
        ) from None
    mcps = [r for r in records if isinstance(r, MetadataChangeProposalWrapper)]
    if len(mcps) != len(records):
        raise click.BadParameter(
            f"{path}: only MCPs with full aspects are supported", ctx=ctx, param=param
        )
    return MetadataFile(path, mcps)


@click.command("load")
@click.argument(
    "metadata_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    callback=_metadata_file,
)
@reports_bad_input
@with_catalog("create", embedded_only=True)
def load_command(metadata_file: MetadataFile, catalog: Catalog) -> None:
    """Load a metadata file (the MCP JSON `datahub ingest` reads) into the embedded store."""
    catalog.emit(metadata_file.mcps)
    if isinstance(catalog, LiteCatalog):
        catalog.reindex()  # browse paths for `datahub lite ls`, rebuilt once after a bulk load
    click.echo(f"loaded {plural(len(metadata_file.mcps), 'aspect')} from {metadata_file.path}")


@click.group()
def steward() -> None:
    """Act as a steward on the embedded store (what the DataHub UI does on a server)."""


def steward_urn(value: str) -> str:
    return value if value.startswith("urn:li:") else f"urn:li:corpuser:{value}"


@steward.command("resolve-incident")
@click.argument("incident_urn")
@click.option("--note", required=True, help="The resolution note.")
@click.option("--as", "actor", required=True, help="The steward (user name or urn).")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def resolve_incident_command(incident_urn: str, note: str, actor: str, catalog: Catalog) -> None:
    """Resolve an incident with a note."""
    resolve_incident(catalog, incident_urn, note, steward_urn(actor))
    click.echo(f"{incident_urn} resolved by {steward_urn(actor)}")


@steward.command("set-property")
@click.argument("entity_urn")
@click.argument("property_name")
@click.argument("values", nargs=-1, required=True)
@click.option("--as", "actor", required=True, help="The steward (user name or urn).")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def set_property_command(
    entity_urn: str, property_name: str, values: tuple[str, ...], actor: str, catalog: Catalog
) -> None:
    """Set a structured property (e.g. reflex.rootCauseStatus CONFIRMED) on an entity.

    One of Reflex's properties, on a lesson or dataset of the store, with values its definition
    allows (as DataHub checks them); anything else is refused and nothing is written."""
    entity_type, urn, typed = steward_assignment(entity_urn, property_name, values)
    _KNOWN_ENTITY[entity_type](catalog, entity_urn)
    catalog.set_structured_properties(entity_urn, {urn: typed}, steward_urn(actor))
    click.echo(f"{urn} = {typed} on {entity_urn} by {steward_urn(actor)}")


class StewardInputError(ReflexError):
    """A steward command's argument names nothing it can act on; the message says which."""


#: The user ``datahub ingest`` writes as by default, and so ``steward land`` too.
INGESTION_USER = "datahub"
#: Longest partition name accepted (DataHub's partition keys are short: ``2026-10-01``,
#: ``region=eu/day=2026-10-01``).
MAX_PARTITION_CHARS = 200
USER_PREFIX = "urn:li:corpuser:"


def known_dataset(catalog: Catalog, urn: str) -> str:
    """``urn``, if it is a dataset urn the store knows."""
    try:
        DatasetUrn.from_string(urn)
    except InvalidUrnError:
        raise StewardInputError(f"not a dataset urn: {excerpt(urn)}") from None
    if catalog.dataset(urn) is None:
        raise StewardInputError(f"no dataset {excerpt(urn)} in the store")
    return urn


def _landed_snapshot(snapshot: Path) -> Path:
    """The snapshot file, absolute (the pipeline reads it from another folder), if it is one
    Reflex can read."""
    try:
        is_file = snapshot.is_file()
    except OSError as error:  # a name too long for the file system, a permission
        raise StewardInputError(
            f"snapshot {excerpt(str(snapshot))} cannot be read: {error.strerror}"
        ) from None
    if snapshot.is_dir():
        raise StewardInputError(f"{excerpt(str(snapshot))} is a folder, not a snapshot file")
    if not is_file:
        raise StewardInputError(f"no snapshot file {excerpt(str(snapshot))}")
    if snapshot.suffix.lower() not in FORMATS_BY_SUFFIX:
        raise StewardInputError(
            f"unsupported snapshot format {excerpt(snapshot.suffix)}; expected one of "
            f"{', '.join(sorted(FORMATS_BY_SUFFIX))}"
        )
    return snapshot.absolute()


def _landed_partition(partition: str) -> str:
    if not (0 < len(partition) <= MAX_PARTITION_CHARS and partition.isprintable()):
        raise StewardInputError(
            f"partition {excerpt(partition)} must be 1 to {MAX_PARTITION_CHARS} printable "
            "characters"
        )
    return partition


@steward.command("land")
@click.argument("dataset_urn")
@click.option(
    "--snapshot",
    type=click.Path(path_type=Path),
    help="The snapshot file that landed (Parquet or CSV); its id is the file name.",
)
@click.option("--partition", help="The table partition that landed, e.g. 2026-10-01.")
@click.option(
    "--as",
    "actor",
    default=INGESTION_USER,
    show_default=True,
    help="The loader's user (name or urn).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the written aspect as JSON.")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def land_command(
    dataset_urn: str,
    snapshot: Path | None,
    partition: str | None,
    actor: str,
    as_json: bool,
    catalog: Catalog,
) -> None:
    """Announce new data on a dataset: the INSERT operation ingestion writes, which the
    pipeline judges with the dataset's controls."""
    if (snapshot is None) == (partition is None):
        raise StewardInputError("give exactly one of --snapshot FILE or --partition P")
    landed = (
        _landed_snapshot(snapshot) if snapshot is not None else _landed_partition(str(partition))
    )
    mcp = landed_operation(
        known_dataset(catalog, dataset_urn), landed, steward_urn(actor), now_ms()
    )
    catalog.emit([mcp])
    if as_json:
        print_json({"urn": dataset_urn, "aspect": mcp.aspectName, "value": mcp.aspect.to_obj()})
    else:
        click.echo(f"{mcp.aspectName} INSERT of {landed} on {dataset_urn} by {steward_urn(actor)}")


def _known_user(catalog: Catalog, name: str) -> str:
    """The user's urn, if the store knows the user: a profile, a status, or a dataset owned
    (a user ingested only as an owner has no profile)."""
    urn = steward_urn(name)
    if not urn.startswith(USER_PREFIX) or urn == USER_PREFIX:
        raise StewardInputError(f"not a user urn: {excerpt(name)}")
    known = (
        catalog.get_aspect(urn, CorpUserInfoClass) is not None
        or catalog.user_status(urn) is not None
        or bool(catalog.datasets_by_owner(urn))
    )
    if not known:
        raise StewardInputError(f"no user {excerpt(urn)} in the store")
    return urn


@steward.command("suspend-user")
@click.argument("user")
@click.option("--as", "actor", required=True, help="The admin suspending them (name or urn).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def suspend_user_command(user: str, actor: str, as_json: bool, catalog: Catalog) -> None:
    """Suspend a user (they left): the corpUserStatus the DataHub UI writes; Reflex then
    checks the ownership of the covered datasets they owned."""
    urn = _known_user(catalog, user)
    already = catalog.user_status(urn) == SUSPENDED
    if not already:  # a repeat is no departure: nothing to write, nothing for Reflex to check
        status = CorpUserStatusClass(
            status=SUSPENDED, lastModified=AuditStampClass(time=now_ms(), actor=steward_urn(actor))
        )
        catalog.emit([acting_as(steward_urn(actor), urn, status)])
    if as_json:
        print_json({"urn": urn, "status": SUSPENDED, "changed": not already})
    else:
        click.echo(f"{urn} {'was already' if already else 'is now'} suspended")


def _known_scenario(ctx: click.Context, param: click.Parameter, name: str | None) -> str | None:
    """The ``--scenario`` name, refused (exit 2) with the demo's scenario names if unknown."""
    from reflex_actions.demo.run import UnknownScenarioError, scenarios_named

    if name is not None:
        try:
            scenarios_named([name])
        except UnknownScenarioError as error:
            raise click.BadParameter(str(error), ctx=ctx, param=param) from None
    return name


@click.command("demo")
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reflex-demo"),
    show_default=True,
    help="Working folder (store, snapshots); created if needed.",
)
@click.option(
    "--scenario",
    metavar="NAME",
    callback=_known_scenario,
    help="Run only the scenario of this name, e.g. missing-values (an unknown name lists "
    "them); default: every scenario.",
)
def demo_command(workdir: Path, scenario: str | None) -> None:
    """Run the whole loop on the embedded store, every scenario or the one named; exit 0 if
    each closes its loop (incident A -> control -> incident B on another dataset)."""
    import shutil
    import sys

    from reflex_actions.demo.run import run_demo
    from reflex_actions.safe_files import is_regular_file

    if workdir.exists() and any(workdir.iterdir()):
        if not is_regular_file(workdir / "reflex.db"):
            raise click.UsageError(
                f"{workdir} is not empty and holds no earlier demo: choose another --dir"
            )
        folder = workdir.resolve()  # a --dir given as a symlink names this folder
        shutil.rmtree(folder)  # an earlier demo's folder: start afresh
        folder.mkdir()
    selected = None if scenario is None else [scenario]
    sys.exit(0 if run_demo(workdir, click.echo, scenarios=selected) else 1)


#: The states in which a lesson has a version in force: published, or published with a new
#: version waiting for approval (the approved one runs until then).
GLOSSARY_TERM_PREFIX = "urn:li:glossaryTerm:"


def known_lesson(catalog: Catalog, urn: str) -> Lesson:
    """The lesson stored on the glossary term ``urn``, if it is one."""
    if not urn.startswith(GLOSSARY_TERM_PREFIX):
        raise StewardInputError(f"not a lesson (glossary term) urn: {excerpt(urn)}")
    lesson = load_lesson(catalog, urn)
    if lesson is None:
        raise StewardInputError(f"no lesson {excerpt(urn)} in the store")
    return lesson


#: How the store is asked whether it holds an entity of each type Reflex's properties apply to.
_KNOWN_ENTITY: dict[str, Callable[[Catalog, str], object]] = {
    "dataset": known_dataset,
    "glossaryTerm": known_lesson,
}


def _written(urn: str, property_urn: str, value: str | int, actor: str, as_json: bool) -> None:
    if as_json:
        print_json(
            {"urn": urn, "property": display_name(property_urn), "value": value, "actor": actor}
        )
    else:
        click.echo(f"{display_name(property_urn)} = {value} on {urn} by {actor}")


@steward.command("retire")
@click.argument("lesson_urn")
@click.option("--as", "actor", required=True, help="The steward (user name or urn).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def retire_command(lesson_urn: str, actor: str, as_json: bool, catalog: Catalog) -> None:
    """Retire a published lesson: the reflex.lifecycle RETIRED the DataHub UI writes; Reflex
    then withdraws its assertions and coverage, and keeps its page and history."""
    lesson = known_lesson(catalog, lesson_urn)
    if not lesson.in_force:
        hint = "" if lesson.approved else ": it was never published, reject it instead"
        raise StewardInputError(f"lesson {lesson_urn} is {lesson.state.value}, not published{hint}")
    catalog.set_structured_properties(lesson_urn, {LIFECYCLE: ["RETIRED"]}, steward_urn(actor))
    _written(lesson_urn, LIFECYCLE, "RETIRED", steward_urn(actor), as_json)


@steward.command("rollback")
@click.argument("lesson_urn")
@click.option("--to", "number", type=int, required=True, help="The approved version's number.")
@click.option("--as", "actor", required=True, help="The steward (user name or urn).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@reports_bad_input
@with_catalog("write", embedded_only=True)
def rollback_command(
    lesson_urn: str, number: int, actor: str, as_json: bool, catalog: Catalog
) -> None:
    """Roll a lesson back to an earlier approved version: the reflex.version the DataHub UI
    writes; Reflex drafts that version anew and asks for approval before it runs again."""
    lesson = known_lesson(catalog, lesson_urn)
    approved = lesson.approved
    if approved is None:
        raise StewardInputError(f"lesson {lesson_urn} has no approved version to roll back to")
    if lesson.state is LessonState.PENDING_APPROVAL:
        raise StewardInputError(
            f"version {lesson.next_version} of {lesson_urn} is waiting for approval: "
            "approve or reject it before rolling back"
        )
    if not 1 <= number <= lesson.version_count:
        raise StewardInputError(
            f"lesson {lesson_urn} has no approved version {excerpt(number)}: choose 1 to "
            f"{lesson.version_count}"
        )
    if lesson.version(number) is None:
        raise StewardInputError(f"lesson {lesson_urn}: {lesson.unkept_version(number)}")
    if number == approved.number and lesson.state is LessonState.PUBLISHED:
        raise StewardInputError(f"version {number} of {lesson_urn} is already in force")
    catalog.set_structured_properties(lesson_urn, {VERSION: [number]}, steward_urn(actor))
    _written(lesson_urn, VERSION, number, steward_urn(actor), as_json)
