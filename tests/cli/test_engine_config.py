"""The `engines:` block of the action config and opening an engine from the environment:
connections are named by environment variable, and no secret is echoed in an error."""

from __future__ import annotations

import json
import re

import pytest
import sqlglot
from click.testing import CliRunner
from pydantic import ValidationError

from reflex_actions.cli.main import cli
from reflex_actions.config import ReflexConfig
from reflex_actions.engines import open_engine
from reflex_actions.engines.base import EngineError
from reflex_actions.engines.duckdb import DuckDBEngine
from reflex_actions.sql import EXECUTED_DIALECTS, RENDERED_DIALECTS

SECRET = "postgresql://reflex:s3cret-pw@db.internal/shop"


@pytest.mark.parametrize("secret", [SECRET, "postgresql://u:pw42@h/db"])
def test_a_connection_names_environment_variables_and_a_value_is_refused_unechoed(
    secret: str,
) -> None:
    """However long the value (pydantic cuts a long input short in the middle), no part of
    it is in the error the action's start logs."""
    with pytest.raises(ValidationError) as raised:
        ReflexConfig.model_validate(
            {
                "engines": [
                    {"platform": "postgres", "engine": "postgres", "connection": {"url": secret}}
                ]
            }
        )
    assert "names no environment variable" in str(raised.value)
    assert "pw" not in str(raised.value) and "@" not in str(raised.value)


def test_the_instance_mapping_wins_and_its_prefix_is_not_the_table() -> None:
    config = ReflexConfig.model_validate(
        {
            "engines": [
                {"platform": "postgres", "engine": "postgres", "connection": {"url": "PG_ANY"}},
                {
                    "platform": "postgres",
                    "platform_instance": "eu",
                    "engine": "postgres",
                    "connection": {"url": "PG_EU"},
                },
            ]
        }
    )
    on_eu = config.engine_for("postgres", "eu.shop.public.orders")
    elsewhere = config.engine_for("postgres", "shop.public.orders")
    assert on_eu is not None and on_eu[0].connection == {"url": "PG_EU"}
    assert on_eu[1] == "shop.public.orders"
    assert elsewhere is not None and elsewhere[0].connection == {"url": "PG_ANY"}
    assert elsewhere[1] == "shop.public.orders"
    assert config.engine_for("snowflake", "db.s.t") is None


def test_opening_an_engine_names_the_variable_never_its_value() -> None:
    with pytest.raises(EngineError, match="REFLEX_TEST_PG_URL") as raised:
        open_engine("postgres", {"url": "REFLEX_TEST_PG_URL"}, environ={})
    assert "s3cret" not in str(raised.value)
    with pytest.raises(EngineError, match="has no setting 'password'"):
        open_engine("postgres", {"password": "PGPASSWORD"}, environ={"PGPASSWORD": SECRET})
    with pytest.raises(EngineError, match="no engine 'oracle'; registered: duckdb"):
        open_engine("oracle")
    assert isinstance(open_engine("duckdb", environ={}), DuckDBEngine)


@pytest.mark.parametrize("dialect", [*EXECUTED_DIALECTS, *RENDERED_DIALECTS])
def test_compile_renders_every_dialect_on_a_quoted_table(tmp_path, dialect: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: uniqueness\nfield: 'order id'\n")
    table = 'shop.public.ord"ers'
    result = CliRunner().invoke(
        cli, ["control", "compile", str(spec), "--dialect", dialect, "--table", table, "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["dialect"] == dialect
    counts, sample = payload["sql"].split(
        ";\n\n-- only when the counts fail: the worst offenders\n"
    )
    for sql in (counts, sample):
        tree = sqlglot.parse_one(sql, read=dialect)
        assert [t.name for t in tree.find_all(sqlglot.exp.Table) if t.name != "snapshot"] == [
            'ord"ers'
        ]
        assert {c.name for c in tree.find_all(sqlglot.exp.Column)} >= {"order id"}


def test_compile_in_a_warehouse_dialect_needs_the_table(tmp_path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("type: uniqueness\nfield: id\n")
    result = CliRunner().invoke(cli, ["control", "compile", str(spec), "--dialect", "snowflake"])
    assert result.exit_code == 2
    assert "give it with --table NAME" in result.output


@pytest.mark.parametrize(
    ("engine", "connection", "named"),
    [
        ("postgress", {"url": "REFLEX_POSTGRES_URL"}, "no engine 'postgress'; registered: duckdb"),
        ("postgres", {"uri": "REFLEX_POSTGRES_URL"}, "has no setting 'uri'; its settings: url"),
    ],
)
def test_a_mistyped_engine_or_setting_stops_the_start_naming_the_known_ones(
    engine: str, connection: dict[str, str], named: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(named)):
        ReflexConfig.model_validate(
            {"engines": [{"platform": "postgres", "engine": engine, "connection": connection}]}
        )
