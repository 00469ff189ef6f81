"""Setting a store up for Reflex: structured property definitions and the lessons node."""

from __future__ import annotations

from pathlib import Path

from datahub.api.entities.structuredproperties.structuredproperties import StructuredProperties
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import GlossaryNodeInfoClass

from reflex_actions.vocabulary import LESSONS_NODE

STRUCTURED_PROPERTIES_FILE = Path(__file__).with_name("structured_properties.yaml")


def bootstrap_mcps() -> list[MetadataChangeProposalWrapper]:
    """The structured property definitions and the lessons glossary node, as MCPs.

    Definitions are read from the same YAML that ``datahub properties upsert -f`` accepts, so the
    two ways of setting up a server cannot disagree. Re-emitting them changes nothing.
    """
    mcps = [
        mcp
        for definition in StructuredProperties.from_yaml(str(STRUCTURED_PROPERTIES_FILE))
        for mcp in definition.generate_mcps()
    ]
    mcps.append(
        MetadataChangeProposalWrapper(
            entityUrn=LESSONS_NODE,
            aspect=GlossaryNodeInfoClass(
                name="Reflex lessons",
                definition=(
                    "Lessons learned from resolved data incidents. Each term is one lesson: its "
                    "root cause, the control compiled from it, and where that control runs."
                ),
            ),
        )
    )
    return mcps
