"""Checks every draft and every steward edit passes before Reflex acts on it.

A draft's control must be a registered type that fits its failure pattern and names only fields
the affected dataset has; evidence quoted from the incident must be verbatim. This is what keeps
an LLM answer (or text injected into an incident) from yielding anything but a valid spec.
"""

from __future__ import annotations

from reflex_actions.catalog.models import DatasetContext
from reflex_actions.controls import Control, parse_control_spec, parse_control_yaml
from reflex_actions.errors import ControlSpecError
from reflex_actions.lessons.facts import FactReader
from reflex_actions.lessons.model import IncidentText, LessonDraft
from reflex_actions.patterns import UNKNOWN_PATTERN
from reflex_actions.registry import registered_kinds


def check_control(
    control: Control,
    pattern: str,
    source: DatasetContext | None,
    catalog: FactReader | None = None,
) -> list[str]:
    """Problems with using ``control`` for this pattern on this dataset (empty when fine); with
    the catalog, also what the kind checks there (e.g. a referenced dataset and its field)."""
    problems = []
    kind = next((k for k in registered_kinds() if k.pattern == pattern), None)
    expected = kind.control_types() if kind else ()
    if control.type not in expected:
        problems.append(
            f"control type {control.type!r} does not fit failure pattern {pattern!r}"
            + (f" (expected {' or '.join(repr(t) for t in expected)})" if expected else "")
        )
    if source is not None:
        names = {f.name for f in source.fields}
        missing = [name for name in control.dataset_fields() if name not in names]
        if missing:
            problems.append(
                f"field(s) {', '.join(repr(m) for m in missing)} do not exist in {source.name}; "
                f"it has {', '.join(sorted(names)) or 'no schema'}"
            )
    if kind is not None and not problems:
        problems += kind.check_control(control, source, catalog)
    return problems


def check_draft(
    draft: LessonDraft,
    text: IncidentText,
    source: DatasetContext | None,
    catalog: FactReader | None = None,
) -> list[str]:
    """Problems with a proposer's draft (empty when it may be written as a lesson)."""
    problems: list[str] = []
    known = [kind.pattern for kind in registered_kinds()]
    if draft.failure_pattern == UNKNOWN_PATTERN:
        if draft.control is not None:
            problems.append("an 'unknown' failure pattern proposes no control")
    elif draft.failure_pattern not in known:
        problems.append(
            f"failure pattern {draft.failure_pattern[:100]!r} is not one of {', '.join(known)}, "
            f"{UNKNOWN_PATTERN}"
        )
    elif draft.control is None:
        problems.append(f"failure pattern {draft.failure_pattern!r} needs a control")
    else:
        try:
            control = parse_control_spec(draft.control)
        except ControlSpecError as error:
            problems.append(str(error))
        else:
            problems += check_control(control, draft.failure_pattern, source, catalog)
    fields = text.fields()
    for item in draft.evidence:
        if item.source in fields and item.quote not in fields[item.source]:
            problems.append(f"evidence {item.quote!r} is not a verbatim quote of the {item.source}")
    return problems


def parse_steward_control(
    spec_text: str, pattern: str, source: DatasetContext | None, catalog: FactReader | None
) -> Control:
    """A steward's (possibly edited) control YAML, validated; raise ControlSpecError otherwise."""
    control = parse_control_yaml(spec_text)
    problems = check_control(control, pattern, source, catalog)
    if problems:
        raise ControlSpecError("; ".join(problems))
    return control
