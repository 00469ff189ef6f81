"""A connection string pasted into the wrong field of the action config (a name, a key) is
never echoed: not in the action's start, not by a command reading the pipeline file."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from datahub_actions.pipeline.pipeline_context import PipelineContext

from reflex_actions.action.reflex_action import ReflexAction
from reflex_actions.bounded import HIDDEN
from reflex_actions.cli.main import cli
from reflex_actions.errors import ReflexError

PASSWORD = "S3cretPW"
SECRETS = [
    f"postgresql://svc:{PASSWORD}@db.example:5432/prod",
    f"host=db user=svc password={PASSWORD}",
]


def _engine(**fields: Any) -> dict[str, Any]:
    return {"engines": [{"platform": "postgres", "engine": "postgres", **fields}]}


#: each place a config names a value the user gave, and what its error says is wrong
PLACES = {
    "an engine's name": (lambda s: _engine(engine=s), "no engine"),
    "a connection setting's name": (
        lambda s: _engine(connection={s: "REFLEX_POSTGRES_URL"}),
        "has no setting",
    ),
    "a setting's name, its variable invalid": (
        lambda s: _engine(connection={s: "not a variable"}),
        "names no environment variable",
    ),
    "a setting's name, its variable no text": (
        lambda s: _engine(connection={s: 5}),
        "Input should be a valid string",
    ),
    "a catalog store's name": (lambda s: {"catalog": s}, "no catalog store"),
    "an unknown top-level key": (lambda s: {s: 1}, "Extra inputs are not permitted"),
    "an unknown key of an engine": (lambda s: _engine(**{s: 1}), "Extra inputs are not permitted"),
}
CASES = [
    pytest.param(config, secret, named, id=f"{place}-{'url' if '://' in secret else 'dsn'}")
    for place, (config, named) in PLACES.items()
    for secret in SECRETS
]


def _assert_hidden(message: str, named: str) -> None:
    assert named in message
    assert HIDDEN in message
    assert PASSWORD not in message and "svc:" not in message


@pytest.mark.parametrize(("config", "secret", "named"), CASES)
def test_the_action_start_hides_a_connection_string_in_a_config_error(
    config: Any, secret: str, named: str
) -> None:
    with pytest.raises(ReflexError) as raised:
        ReflexAction.create(config(secret), PipelineContext("p", None))
    _assert_hidden("".join(traceback.format_exception(raised.value)), named)


@pytest.mark.parametrize(("config", "secret", "named"), CASES)
def test_evaluate_hides_a_connection_string_in_a_config_error(
    tmp_path: Path, config: Any, secret: str, named: str
) -> None:
    pipeline = tmp_path / "reflex.yaml"
    pipeline.write_text(yaml.safe_dump({"action": {"type": "reflex", "config": config(secret)}}))
    result = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(pipeline), "--interval", "1h"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    _assert_hidden(result.output, named)


def test_a_duplicate_key_that_is_a_connection_string_is_not_echoed(tmp_path: Path) -> None:
    pipeline = tmp_path / "reflex.yaml"
    pipeline.write_text(f"action:\n  type: reflex\n  '{SECRETS[0]}': 1\n  '{SECRETS[0]}': 2\n")
    result = CliRunner().invoke(cli, ["evaluate", "--due", "-c", str(pipeline)])
    assert result.exit_code == 2
    _assert_hidden(result.output, "duplicate key")
