"""Scoring a candidate for a control on the dataset's rows: domain, schema, keys, lineage."""

from __future__ import annotations

from reflex_actions.catalog.models import DatasetContext, FieldInfo
from reflex_actions.similarity.config import SchemaWeights, SimilarityConfig
from reflex_actions.similarity.fields import FieldMatch, describe, match_field, type_family
from reflex_actions.similarity.lineage import Relation
from reflex_actions.similarity.models import Excluded, Signal, shared_domain


def source_fields(source: DatasetContext, names: list[str]) -> list[FieldInfo]:
    """The control's fields as the source declares them (name only if its schema lacks one)."""
    return [source.field(name) or FieldInfo(name=name) for name in names]


def matched_fields(
    fields: list[FieldInfo], candidate: DatasetContext, config: SimilarityConfig
) -> list[FieldMatch]:
    """Every control field's counterpart in the candidate; raise Excluded when one is missing
    or has an incompatible type."""
    matches: list[FieldMatch] = []
    for field in fields:
        match = match_field(field, candidate, config.synonyms)
        if match is None:
            raise Excluded(f"missing field {field.name}")
        if not match.compatible:
            raise Excluded(
                f"incompatible type: {describe(match.target)} is {type_family(match.target)}, "
                f"the source's {describe(field)} is {type_family(field)}"
            )
        matches.append(match)
    return matches


def _key_signal(matches: list[FieldMatch], weights: SchemaWeights) -> Signal:
    """Whether the matched fields are a key in the candidate too (repeats may be legitimate
    where they are not)."""
    if all(m.target.is_key for m in matches):
        return Signal(
            name="key_match",
            contribution=weights.key_match,
            reason="the same field(s) are a key here too",
        )
    not_keys = ", ".join(m.target.name for m in matches if not m.target.is_key)
    return Signal(
        name="not_a_key",
        contribution=weights.not_a_key,
        reason=f"{not_keys} is not a key here: repeated values may be legitimate",
    )


def schema_signals(
    source: DatasetContext,
    candidate: DatasetContext,
    matches: list[FieldMatch],
    relation: Relation | None,
    config: SimilarityConfig,
    keys: bool = True,
) -> list[Signal]:
    """Domain, schema match, (with ``keys``) whether the fields are keys here too, lineage and
    platform."""
    weights = config.schema_weights
    signals: list[Signal] = []
    signals += shared_domain(source, candidate, weights.shared_domain)
    if matches:
        quality = min(match.quality for match in matches)
        parts = [
            describe(m.target)
            + ("" if m.how == "exact" else f", {m.how} match for {m.source.name}")
            for m in matches
        ]
        signals.append(
            Signal(
                name="schema_match",
                contribution=round(weights.schema_match * quality, 4),
                reason=f"has {'; '.join(parts)} like the source",
            )
        )
        if keys:
            signals.append(_key_signal(matches, weights))
    if relation is not None:
        signals.append(
            Signal(
                name="lineage",
                contribution=round(weights.lineage / relation.hops, 4),
                reason=relation.description,
            )
        )
    if candidate.platform == source.platform:
        signals.append(
            Signal(
                name="same_platform",
                contribution=weights.same_platform,
                reason=f"same platform {source.platform}",
            )
        )
    return signals
