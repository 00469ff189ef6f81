"""Reflex's names in DataHub (DESIGN.md §2): structured properties and the lessons glossary node.

Plain strings with no DataHub import, so the domain core can use them.
"""

from __future__ import annotations


def property_urn(qualified_name: str) -> str:
    return f"urn:li:structuredProperty:{qualified_name}"


ROOT_CAUSE_STATUS = property_urn("reflex.rootCauseStatus")
APPROVAL = property_urn("reflex.approval")
SCOPE = property_urn("reflex.scope")
SCOPE_RULE = property_urn("reflex.scopeRule")
ROOT_CAUSE = property_urn("reflex.rootCause")
CONTROL_SPEC = property_urn("reflex.controlSpec")
LIFECYCLE = property_urn("reflex.lifecycle")
VERSION = property_urn("reflex.version")
COVERAGE = property_urn("reflex.coverage")
PROPOSED_OWNER = property_urn("reflex.proposedOwner")
OWNERSHIP_CHANGE_APPROVAL = property_urn("reflex.ownershipChangeApproval")

LESSONS_NODE = "urn:li:glossaryNode:reflex.lessons"
#: incidentInfo.customType of the incidents Reflex raises itself (incident B)
RECURRENCE_TYPE = "REFLEX_RECURRENCE"


def display_name(urn: str) -> str:
    """A short readable name: a dataset urn's name, otherwise the urn's last part."""
    if urn.startswith("urn:li:dataset:("):
        parts = urn.rsplit(",", 2)
        if len(parts) == 3:
            return parts[1]
    return urn.rsplit(":", 1)[-1]


def names_of(urns: list[str], shown: int = 5) -> str:
    """The first ``shown`` of ``urns`` by name, with how many there are when that is more: a
    line stays short whatever a scope's size."""
    named = ", ".join(display_name(urn) for urn in urns[:shown])
    if len(urns) <= shown:
        return named
    return f"{len(urns):,} datasets: {named}, …"


def dataset_platform(urn: str) -> str:
    """A dataset urn's platform name (``snowflake``), or "" when the urn is not a dataset's."""
    if urn.startswith("urn:li:dataset:(urn:li:dataPlatform:"):
        return urn.removeprefix("urn:li:dataset:(urn:li:dataPlatform:").split(",", 1)[0]
    return ""
