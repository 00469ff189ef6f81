"""Free text from libraries and users reaches messages cut to a bound, on one line."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from reflex_actions.bounded import (
    EXCERPT_CHARS,
    HIDDEN,
    MAX_INT_DIGITS,
    BoundedYamlError,
    is_connection_string,
    load_bounded_yaml,
    safe_excerpt,
    shorten,
    validated,
)
from reflex_actions.errors import ReflexError


def test_shorten_keeps_short_text_and_cuts_long_text_to_its_limit() -> None:
    assert shorten("a  short\n\tmessage") == "a short message"
    long = "word " * 1000
    cut = shorten(long)
    assert len(cut) == EXCERPT_CHARS and cut.endswith("...")
    assert cut[:-3] == long[: EXCERPT_CHARS - 3]
    assert shorten("x" * 11, limit=10) == "xxxxxxx..."
    assert shorten("x" * 10, limit=10) == "x" * 10


def test_a_connection_string_is_a_url_naming_a_user_or_text_setting_a_secret() -> None:
    assert is_connection_string("postgresql://svc:pw@db/prod")
    assert is_connection_string("host=db user=svc password=pw")
    assert is_connection_string("dbname=x PWD =pw")
    assert is_connection_string("https://host/x?api_key=abc")
    assert not is_connection_string("https://host/path")  # a URL naming no user
    assert not is_connection_string("svc@db")  # an address, no scheme
    assert not is_connection_string("shop.orders")


def test_a_value_is_quoted_cut_unless_it_is_a_connection_string() -> None:
    assert safe_excerpt("shop.orders") == "'shop.orders'"
    assert safe_excerpt("postgresql://svc:pw@db/prod") == HIDDEN
    assert safe_excerpt(5) == "5"
    long = safe_excerpt("x" * 1000)
    assert len(long) <= EXCERPT_CHARS + 2 and "..." in long


class _Named(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "x"


def test_a_validated_block_names_the_first_bad_field_and_never_its_value() -> None:
    assert validated(_Named, None, "action.config") == _Named()
    assert validated(_Named, {"name": "y"}, "action.config").name == "y"
    with pytest.raises(ReflexError) as bad_field:
        validated(_Named, {"name": ["S3cret"]}, "action.config")
    assert str(bad_field.value) == "action.config.name: Input should be a valid string"
    with pytest.raises(ReflexError) as bad_key:
        validated(_Named, {"postgresql://svc:S3cret@db/prod": 1}, "action.config")
    assert str(bad_key.value) == f"action.config.{HIDDEN}: Extra inputs are not permitted"
    with pytest.raises(ReflexError) as bad_block:
        validated(_Named, [1], "action.config")
    assert str(bad_block.value).startswith("action.config: Input should be a valid dictionary")


def test_yaml_within_its_bounds_parses_and_one_character_or_level_more_is_refused() -> None:
    assert load_bounded_yaml("a: [1]", "spec", max_chars=6, max_depth=3) == {"a": [1]}
    with pytest.raises(BoundedYamlError, match=r"^spec is 7 characters long; at most 6 are"):
        load_bounded_yaml("a: [1] ", "spec", max_chars=6, max_depth=3)
    with pytest.raises(BoundedYamlError, match=r"^spec nests deeper than 2 levels \(line 1\)$"):
        load_bounded_yaml("a: [1]", "spec", max_chars=100, max_depth=2)
    assert load_bounded_yaml("a: [1]\nb: 2", "spec", max_chars=100, max_depth=3)["b"] == 2


def test_a_number_of_at_most_the_digits_allowed_parses() -> None:
    most = "9" * MAX_INT_DIGITS
    assert load_bounded_yaml(f"n: {most}", "spec", 10_000, 3) == {"n": int(most)}
    with pytest.raises(BoundedYamlError, match=f"^a number of {MAX_INT_DIGITS + 1} digits"):
        load_bounded_yaml(f"\nn: {most}9", "spec", 10_000, 3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\nb: &x 2\nc: *x", "spec uses a YAML anchor or alias (line 2); write each value out"),
        ("a: 1\n\na: 2", "duplicate key 'a' (line 3)"),
        ("a: 1\n? [b]\n: 2", "a mapping key must be a plain value (line 2)"),
        ("a: 1\nb: [", "spec is not valid YAML (line 2): expected the node content, but found"),
        (f"\nn: {'9' * (MAX_INT_DIGITS + 1)}", "(line 2); at most 1000 digits are allowed"),
    ],
)
def test_a_refused_yaml_names_the_line_it_stops_at(text: str, message: str) -> None:
    with pytest.raises(BoundedYamlError) as refused:
        load_bounded_yaml(text, "spec", 10_000, 5)
    assert message in str(refused.value)


def test_a_mapping_may_hold_many_distinct_keys() -> None:
    assert load_bounded_yaml("a: 1\nb: 2\nc: 3", "spec", 100, 3) == {"a": 1, "b": 2, "c": 3}


def test_the_loader_lets_go_of_its_depth_after_each_node() -> None:
    """Siblings do not add up: only nesting counts towards the depth."""
    text = "\n".join(f"k{i}: [[{i}]]" for i in range(10))
    assert len(load_bounded_yaml(text, "spec", 1_000, 4)) == 10


def test_a_character_yaml_refuses_is_a_bounded_error() -> None:
    with pytest.raises(BoundedYamlError, match=r"^spec is not valid YAML: unacceptable character"):
        load_bounded_yaml("a: \x07", "spec", 100, 3)


class _Pair(BaseModel):
    model_config = ConfigDict(extra="forbid")
    first: int
    second: int


def test_a_validated_block_names_its_first_bad_field_and_a_long_key_cut() -> None:
    with pytest.raises(ReflexError) as both_bad:
        validated(_Pair, {"first": "x", "second": "y"}, "block")
    assert str(both_bad.value).startswith("block.first: ")
    key = "k" * 300
    with pytest.raises(ReflexError) as long_key:
        validated(_Pair, {"first": 1, "second": 2, key: 3}, "block")
    assert str(long_key.value) == f"block.{key[:197]}...: Extra inputs are not permitted"


def test_nesting_after_siblings_is_still_counted() -> None:
    with pytest.raises(BoundedYamlError, match="nests deeper than 3 levels"):
        load_bounded_yaml("a: 1\nb: 2\nc: [[1]]", "spec", 100, 3)


def test_a_long_yaml_problem_is_cut_to_its_bound() -> None:
    with pytest.raises(BoundedYamlError) as refused:
        load_bounded_yaml("a: !" + "x" * 300 + " 1", "spec", 1_000, 5)
    prefix = "spec is not valid YAML (line 1): "
    message = str(refused.value)
    assert message.startswith(prefix + "could not determine a constructor for the tag")
    assert len(message) == len(prefix) + 200 and message.endswith("...")
