"""Store commands: ``init``, ``load`` and the ``steward`` actions for the embedded store."""

from __future__ import annotations

from pathlib import Path

import click
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.source.file import read_metadata_file

from reflex_actions.catalog.base import Catalog, CatalogError
from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.catalog.steward import resolve_incident
from reflex_actions.cli.output import reports_bad_input
from reflex_actions.cli.store import with_catalog
from reflex_actions.vocabulary import property_urn


@click.command("init")
@reports_bad_input
@with_catalog()
def init_command(catalog: Catalog) -> None:
    """Create Reflex's structured properties and the lessons glossary node (idempotent)."""
    mcps = bootstrap_mcps()
    catalog.emit(mcps)
    click.echo(
        f"initialized: {len(mcps)} definitions written (unchanged ones are left as they are)"
    )


@click.command("load")
@click.argument("metadata_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@reports_bad_input
@with_catalog(embedded_only=True)
def load_command(metadata_file: Path, catalog: Catalog) -> None:
    """Load a metadata file (the MCP JSON `datahub ingest` reads) into the embedded store."""
    try:
        records = list(read_metadata_file(metadata_file))
    except Exception as error:
        raise CatalogError(f"cannot read metadata file {metadata_file}: {error}") from None
    mcps = [r for r in records if isinstance(r, MetadataChangeProposalWrapper)]
    if len(mcps) != len(records):
        raise CatalogError(f"{metadata_file}: only MCPs with full aspects are supported")
    catalog.emit(mcps)
    if isinstance(catalog, LiteCatalog):
        catalog.reindex()  # browse paths for `datahub lite ls`, rebuilt once after a bulk load
    click.echo(f"loaded {len(mcps)} aspects from {metadata_file}")


@click.group()
def steward() -> None:
    """Act as a steward on the embedded store (what the DataHub UI does on a server)."""


def _user(value: str) -> str:
    return value if value.startswith("urn:li:") else f"urn:li:corpuser:{value}"


@steward.command("resolve-incident")
@click.argument("incident_urn")
@click.option("--note", required=True, help="The resolution note.")
@click.option("--as", "actor", required=True, help="The steward (user name or urn).")
@reports_bad_input
@with_catalog(embedded_only=True)
def resolve_incident_command(incident_urn: str, note: str, actor: str, catalog: Catalog) -> None:
    """Resolve an incident with a note."""
    resolve_incident(catalog, incident_urn, note, _user(actor))
    click.echo(f"{incident_urn} resolved by {_user(actor)}")


@steward.command("set-property")
@click.argument("entity_urn")
@click.argument("property_name")
@click.argument("values", nargs=-1, required=True)
@click.option("--as", "actor", required=True, help="The steward (user name or urn).")
@reports_bad_input
@with_catalog(embedded_only=True)
def set_property_command(
    entity_urn: str, property_name: str, values: tuple[str, ...], actor: str, catalog: Catalog
) -> None:
    """Set a structured property (e.g. reflex.rootCauseStatus CONFIRMED) on an entity."""
    urn = property_name if property_name.startswith("urn:li:") else property_urn(property_name)
    catalog.set_structured_properties(entity_urn, {urn: list(values)}, _user(actor))
    click.echo(f"{urn} = {list(values)} on {entity_urn} by {_user(actor)}")


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

    if workdir.exists() and any(workdir.iterdir()):
        if not (workdir / "reflex.db").is_file():
            raise click.UsageError(
                f"{workdir} is not empty and holds no earlier demo: choose another --dir"
            )
        shutil.rmtree(workdir)  # an earlier demo's folder: start afresh
    selected = None if scenario is None else [scenario]
    sys.exit(0 if run_demo(workdir, click.echo, scenarios=selected) else 1)
