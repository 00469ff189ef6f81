"""``reflex.scopeRule``'s text: a small mapping, read strictly and boundedly."""

from __future__ import annotations

import pytest

from reflex_actions.lessons.scope import MAX_RULE_CHARS, ScopeRule, ScopeRuleError, parse_scope_rule


@pytest.mark.parametrize("text", ["", "  ", "\n"])
def test_an_empty_rule_is_no_rule(text: str) -> None:
    assert parse_scope_rule(text) is None


def test_a_rule_is_read_from_flow_yaml_or_json_and_said_canonically() -> None:
    from_yaml = parse_scope_rule("{field: order_id, platform: postgres}")
    from_json = parse_scope_rule('{"platform": "postgres", "field": "order_id"}')
    assert from_yaml == from_json == ScopeRule(platform="postgres", field="order_id")
    assert from_yaml is not None
    assert from_yaml.text() == '{"field": "order_id", "platform": "postgres"}'
    assert parse_scope_rule(from_yaml.text()) == from_yaml


def test_a_rule_matches_a_dataset_meeting_every_criterion() -> None:
    rule = ScopeRule(platform="postgres", domain="urn:li:domain:finance", field="Order_ID")
    assert rule.matches("urn:li:dataPlatform:postgres", "urn:li:domain:finance", ["order_id"])
    assert rule.matches("postgres", "urn:li:domain:finance", ["id", "ORDER_ID"])
    assert not rule.matches("snowflake", "urn:li:domain:finance", ["order_id"])
    assert not rule.matches("postgres", None, ["order_id"])
    assert not rule.matches("postgres", "urn:li:domain:finance", ["order"])
    assert ScopeRule(field="x").matches("anything", None, ["X"])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{platform: ''}", "platform: String should have at least 1 character"),
        ("{platform: 5}", "platform: Input should be a valid string"),
        ("postgres", "is a mapping of platform, domain and field"),
        ("{platform: postgres, platform: mysql}", "reflex.scopeRule: duplicate key 'platform'"),
        ("{a: {b: {c: 1}}}", "nests deeper"),
        ("x" * (MAX_RULE_CHARS + 1), f"at most {MAX_RULE_CHARS} are allowed"),
    ],
)
def test_a_text_that_is_not_a_rule_says_what_is_wrong_in_one_line(text: str, problem: str) -> None:
    with pytest.raises(ScopeRuleError, match=None) as raised:
        parse_scope_rule(text)
    message = str(raised.value)
    assert problem in message and "\n" not in message and len(message) < 300
