"""Reflex's names in DataHub (DESIGN.md §2): structured properties, the lessons glossary node."""

from __future__ import annotations

from pathlib import Path

from datahub.api.entities.structuredproperties.structuredproperties import StructuredProperties
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import GlossaryNodeInfoClass

STRUCTURED_PROPERTIES_FILE = Path(__file__).with_name("structured_properties.yaml")


def property_urn(qualified_name: str) -> str:
    return f"urn:li:structuredProperty:{qualified_name}"


ROOT_CAUSE_STATUS = property_urn("reflex.rootCauseStatus")
APPROVAL = property_urn("reflex.approval")
SCOPE = property_urn("reflex.scope")
ROOT_CAUSE = property_urn("reflex.rootCause")
CONTROL_SPEC = property_urn("reflex.controlSpec")
COVERAGE = property_urn("reflex.coverage")
PROPOSED_OWNER = property_urn("reflex.proposedOwner")
OWNERSHIP_CHANGE_APPROVAL = property_urn("reflex.ownershipChangeApproval")

LESSONS_NODE = "urn:li:glossaryNode:reflex.lessons"


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
