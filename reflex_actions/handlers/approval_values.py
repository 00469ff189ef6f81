"""What an event on a lesson's properties carries for gate 2, read the same way by every decision
that acts on it (an approval, an edit of a published version): its control spec, its scope (the
datasets listed and the rule), whether that scope can be published, and how it reads on a line.
"""

from __future__ import annotations

from reflex_actions.controls import control_spec, parse_control_yaml
from reflex_actions.errors import ControlSpecError
from reflex_actions.handlers.change import AspectChange
from reflex_actions.handlers.lesson_store import MAX_SCOPE_BYTES, as_text
from reflex_actions.lessons.model import stored_scope_bytes
from reflex_actions.lessons.scope import ScopeRule, parse_scope_rule
from reflex_actions.vocabulary import CONTROL_SPEC, SCOPE, SCOPE_RULE, names_of


def scope_refusal(scope: list[str], rule: ScopeRule | None = None) -> str | None:
    """Why a scope cannot be published, or None when it can. A listed scope's bound is what
    the lesson's record can hold (``MAX_SCOPE_BYTES``), not a count: a scope of short names
    holds more; a larger one is a rule (``reflex.scopeRule``)."""
    if not scope and rule is None:
        return "reflex.scope is empty and there is no reflex.scopeRule: there is nothing to publish"
    size = stored_scope_bytes(scope)
    if size > MAX_SCOPE_BYTES:
        fits = len(scope) * MAX_SCOPE_BYTES // size
        return (
            f"reflex.scope names {len(scope):,} datasets in {size:,} bytes as stored; a "
            f"lesson's record holds a listed scope of at most {MAX_SCOPE_BYTES:,} bytes (about "
            f"{fits:,} datasets named like these): say the scope as a rule in "
            "reflex.scopeRule (a platform, a domain, a field) instead"
        )
    return None


def event_scope(change: AspectChange) -> tuple[list[str], ScopeRule | None]:
    """The scope the event carries: the datasets listed, and the rule; ScopeRuleError when
    the rule is not one."""
    scope = list(dict.fromkeys(str(urn) for urn in change.property_values(SCOPE)))
    return scope, parse_scope_rule(as_text(change.property_values(SCOPE_RULE)))


def scope_words(scope: list[str], rule: ScopeRule | None) -> str:
    """A scope on one line: the datasets listed (the first few), the rule."""
    if rule is None:
        return names_of(scope)
    listed = f" and {names_of(scope)}" if scope else ""
    return f"every dataset matching {rule.text()}{listed}"


def event_control(change: AspectChange) -> dict[str, object] | None:
    """The control spec the event carries, canonical like ``Lesson.control``; None if unusable."""
    try:
        control = parse_control_yaml(as_text(change.property_values(CONTROL_SPEC)))
    except ControlSpecError:
        return None
    return control_spec(control)
