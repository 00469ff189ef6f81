"""Reading the shipped pipeline configs the way `datahub actions -c` reads them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from datahub.configuration.config_loader import load_config_file
from datahub_actions.pipeline.pipeline_config import PipelineConfig

CONFIGS = Path(__file__).resolve().parents[2] / "action_configs"
EMBEDDED = CONFIGS / "reflex-embedded.yaml"
PRODUCTION = CONFIGS / "reflex.yaml"
#: ``${NAME}``, ``${NAME:-default}`` or ``${NAME-default}``, as the datahub loader expands them
VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<default>:?-[^}]*)?\}")


def referenced_variables(path: Path) -> dict[str, bool]:
    """The environment variables a config reads, each with whether it has a default."""
    found: dict[str, bool] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    text = "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in lines)  # YAML comments
    for match in VARIABLE.finditer(text):
        has_default = match.group("default") is not None
        found[match.group("name")] = found.get(match.group("name"), True) and has_default
    return found


def yaml_error(path: Path) -> str | None:
    """Why ``path`` is not YAML, or None. The datahub loader parses the file as YAML before it
    expands ``${VAR:-default}``, so each reference must be valid YAML as written."""
    text = path.read_text(encoding="utf-8")
    try:
        yaml.safe_load(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        line = text.splitlines()[mark.line].strip() if mark else "?"
        return f"{path.name} line {mark.line + 1 if mark else '?'} ({line}): {error.problem}"
    return None


def load_pipeline(path: Path) -> PipelineConfig:
    """The pipeline config as `datahub actions -c` builds it (env vars expanded)."""
    raw = load_config_file(path)
    assert "${" not in json.dumps(raw), "an environment variable was left unexpanded"
    return PipelineConfig.model_validate(raw)
