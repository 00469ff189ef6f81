"""Reading the pipeline file ``datahub actions -c`` runs, for the commands that act beside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from datahub.configuration.config_loader import EnvResolver

from reflex_actions.bounded import BoundedYamlError, load_bounded_yaml
from reflex_actions.errors import ReflexError

#: Longest pipeline file read (characters).
MAX_PIPELINE_CHARS = 1024 * 1024


def load_pipeline(path: Path) -> dict[str, Any]:
    """A datahub-actions pipeline file, bounded, with its ``${VAR:-default}`` resolved."""
    try:
        with path.open(encoding="utf-8") as handle:
            text = handle.read(MAX_PIPELINE_CHARS + 1)
        data = load_bounded_yaml(text, str(path), MAX_PIPELINE_CHARS, max_depth=16)
    except (OSError, UnicodeDecodeError, BoundedYamlError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ReflexError(f"cannot read {path}: {reason}") from None
    if not isinstance(data, dict):
        raise ReflexError(f"{path} is not a pipeline (a mapping with an `action` block)")
    resolved: dict[str, Any] = EnvResolver(os.environ).resolve(data)
    return resolved
