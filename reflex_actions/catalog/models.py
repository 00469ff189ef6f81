"""What Reflex reads from the catalog, as plain models the domain core can use.

These carry no DataHub classes: the adapters translate aspects into them, so the similarity
resolver, lesson drafting and handlers can be tested without a catalog.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class FieldInfo(_Frozen):
    """One schema field. ``name`` is the simple path (v2 field-path annotations stripped)."""

    name: str
    native_type: str | None = None
    #: DataHub's type class, e.g. "string", "number", "date", "boolean"
    type: str | None = None
    is_key: bool = False


class OwnerInfo(_Frozen):
    owner: str
    ownership_type: str


class DatasetContext(_Frozen):
    """Everything Reflex weighs about one dataset."""

    urn: str
    name: str
    platform: str
    sub_types: tuple[str, ...] = ()
    domain: str | None = None
    fields: tuple[FieldInfo, ...] = ()
    owners: tuple[OwnerInfo, ...] = ()
    tags: tuple[str, ...] = ()
    glossary_terms: tuple[str, ...] = ()
    #: structured property urn -> its values
    structured_properties: dict[str, tuple[str | float, ...]] = {}
    upstreams: tuple[str, ...] = ()
    downstreams: tuple[str, ...] = ()

    def field(self, name: str) -> FieldInfo | None:
        return next((f for f in self.fields if f.name == name), None)


class IncidentContext(_Frozen):
    urn: str
    title: str | None = None
    description: str | None = None
    type: str
    state: str
    resolution_note: str | None = None
    entities: tuple[str, ...] = ()
    source_type: str | None = None
    source_urn: str | None = None
    last_updated_by: str | None = None
