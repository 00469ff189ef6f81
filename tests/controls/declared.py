"""Declaring where control types are defined (entry point group ``reflex_actions.controls``) the
way pip would: a ``.dist-info`` with an ``entry_points.txt`` on ``sys.path``.

:data:`BUILT_IN` are the declarations ``pyproject.toml`` makes for the built-in control types.
"""

from __future__ import annotations

from pathlib import Path

from reflex_actions.kinds import CONTROL_ENTRY_POINT_GROUP

#: Where each built-in control type is defined (``pyproject.toml``'s
#: ``[project.entry-points."reflex_actions.controls"]``).
BUILT_IN = (
    "accepted_values = reflex_actions.kinds.invalid_values:AcceptedValuesControl",
    "active_ownership = reflex_actions.controls.active_ownership:ActiveOwnershipControl",
    "freshness = reflex_actions.kinds.stale_data:FreshnessControl",
    "not_null = reflex_actions.kinds.missing_values:NotNullControl",
    "referential_integrity = reflex_actions.kinds.orphaned_references:ReferentialIntegrityControl",
    "schema_contract = reflex_actions.kinds.schema_change:SchemaContractControl",
    "uniqueness = reflex_actions.controls.uniqueness:UniquenessControl",
    "value_range = reflex_actions.kinds.invalid_values:ValueRangeControl",
    "volume = reflex_actions.kinds.missing_rows:VolumeControl",
)


def write_declarations(site: Path, *lines: str) -> Path:
    """A distribution in ``site`` declaring ``lines`` (``type = module:Class``); ``site``."""
    info = site / "reflex_test_controls-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reflex-test-controls\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{CONTROL_ENTRY_POINT_GROUP}]\n" + "".join(f"{line}\n" for line in lines)
    )
    return site
