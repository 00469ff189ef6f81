"""Matching a control's fields to a candidate's schema: names, synonyms, type families."""

from __future__ import annotations

import re
from dataclasses import dataclass

from reflex_actions.catalog.models import DatasetContext, FieldInfo

_NOT_ALNUM = re.compile(r"[^0-9a-z]")

#: Native type prefixes by family, for fields whose DataHub type class is unknown.
_NATIVE_FAMILIES = (
    ("string", ("VARCHAR", "CHAR", "TEXT", "STRING", "UUID")),
    (
        "number",
        (
            "BIGINT",
            "INT",
            "SMALLINT",
            "TINYINT",
            "DECIMAL",
            "NUMERIC",
            "NUMBER",
            "DOUBLE",
            "FLOAT",
            "REAL",
        ),
    ),
    ("time", ("TIMESTAMP", "DATETIME")),
    ("date", ("DATE",)),
    ("boolean", ("BOOL",)),
)


def normalize(name: str) -> str:
    """``Transaction_ID`` and ``transactionId`` -> ``transactionid``."""
    return _NOT_ALNUM.sub("", name.lower())


def type_family(field: FieldInfo) -> str | None:
    if field.type:
        return field.type
    native = (field.native_type or "").upper()
    return next(
        (family for family, prefixes in _NATIVE_FAMILIES if native.startswith(prefixes)), None
    )


def describe(field: FieldInfo) -> str:
    kind = ", ".join(filter(None, [field.native_type, "key" if field.is_key else None]))
    return f"{field.name} ({kind})" if kind else field.name


@dataclass(frozen=True)
class FieldMatch:
    source: FieldInfo
    target: FieldInfo
    #: "exact", "normalized", "synonym", or "role" (a field doing the same job under another
    #: name, e.g. a table's only timestamp)
    how: str

    @property
    def quality(self) -> float:
        return {"exact": 1.0, "normalized": 0.9, "synonym": 0.8, "role": 0.7}[self.how]

    @property
    def compatible(self) -> bool:
        source, target = type_family(self.source), type_family(self.target)
        return source is None or target is None or source == target


def match_field(
    source: FieldInfo, candidate: DatasetContext, synonyms: dict[str, list[str]]
) -> FieldMatch | None:
    """The candidate's field standing for ``source``: exact name, normalized name, or synonym."""
    exact = candidate.field(source.name)
    if exact is not None:
        return FieldMatch(source, exact, "exact")
    wanted = normalize(source.name)
    for field in candidate.fields:
        if normalize(field.name) == wanted:
            return FieldMatch(source, field, "normalized")
    aliases = {normalize(name) for name in synonyms_of(source.name, synonyms)}
    for field in candidate.fields:
        if normalize(field.name) in aliases:
            return FieldMatch(source, field, "synonym")
    return None


def synonyms_of(name: str, synonyms: dict[str, list[str]]) -> list[str]:
    """Other names for ``name`` (to look candidates up by)."""
    wanted = normalize(name)
    names: list[str] = []
    for key, group in synonyms.items():
        if wanted in {normalize(key), *(normalize(g) for g in group)}:
            names += [n for n in [key, *group] if normalize(n) != wanted]
    return names
