"""A scope as a rule: every dataset of a platform, a domain or with a field, however many.

A scope listed in ``reflex.scope`` is bounded by what the lesson's record and one change-log
message can hold (about 14,000 datasets). A steward who means "every PostgreSQL table with an
``order_id``" writes that instead, in ``reflex.scopeRule``: the approval publishes the control
on the datasets the catalog holds that match the rule when the approval is handled (those
listed in ``reflex.scope`` too), in slices. The rule is what was approved: datasets created
later are not covered until a new version is approved on the rule again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reflex_actions.bounded import BoundedYamlError, load_bounded_yaml
from reflex_actions.errors import ReflexError

#: Longest rule text read (a rule is a line of three short values).
MAX_RULE_CHARS = 2_000


class ScopeRuleError(ReflexError):
    """A ``reflex.scopeRule`` that is not a rule; the message is one line."""


class ScopeRule(BaseModel):
    """Every dataset matching all the criteria given (at least one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the platform's name, as in its urn (``postgres`` for ``urn:li:dataPlatform:postgres``)
    platform: str | None = Field(default=None, min_length=1, max_length=200)
    #: a domain's urn
    domain: str | None = Field(default=None, min_length=1, max_length=500)
    #: a field the dataset has (names compared ignoring case)
    field: str | None = Field(default=None, min_length=1, max_length=500)

    @model_validator(mode="after")
    def _says_something(self) -> ScopeRule:
        if self.platform is None and self.domain is None and self.field is None:
            raise ValueError("a scope rule names a platform, a domain or a field")
        return self

    def text(self) -> str:
        """The rule on one line, canonical: what the lesson page shows and the digest takes."""
        return json.dumps(self.model_dump(exclude_none=True), sort_keys=True)

    def matches(self, platform: str, domain: str | None, fields: Iterable[str]) -> bool:
        """Whether a dataset on ``platform``, in ``domain``, with these fields matches."""
        if self.platform is not None and platform.split(":")[-1] != self.platform:
            return False
        if self.domain is not None and domain != self.domain:
            return False
        return self.field is None or self.field.lower() in {name.lower() for name in fields}


def parse_scope_rule(text: str) -> ScopeRule | None:
    """``reflex.scopeRule``'s text as a rule (flow YAML or JSON, like the control spec); None
    when it is empty. Anything else is a :class:`ScopeRuleError` naming what is wrong."""
    if not text.strip():
        return None
    try:
        data = load_bounded_yaml(text, "reflex.scopeRule", MAX_RULE_CHARS, 3)
    except BoundedYamlError as error:
        said = str(error)
        named = said if said.startswith("reflex.") else f"reflex.scopeRule: {said}"
        raise ScopeRuleError(named) from None
    if not isinstance(data, dict):
        raise ScopeRuleError(
            "reflex.scopeRule is a mapping of platform, domain and field, "
            "e.g. {platform: postgres, field: order_id}"
        )
    try:
        rule = ScopeRule.model_validate(data)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ScopeRuleError(
            f"reflex.scopeRule {where + ': ' if where else ''}{problem['msg']}"
        ) from None
    return rule
