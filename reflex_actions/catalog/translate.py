"""Aspects -> Reflex's catalog models. Shared by every adapter so they read identically."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from datahub.metadata.schema_classes import (
    DatasetPropertiesClass,
    DomainsClass,
    GlobalTagsClass,
    GlossaryTermsClass,
    IncidentInfoClass,
    OwnershipClass,
    SchemaMetadataClass,
    StructuredPropertiesClass,
    SubTypesClass,
    UpstreamLineageClass,
    _Aspect,
)
from datahub.utilities.urns.dataset_urn import DatasetUrn

from reflex_actions.catalog.models import DatasetContext, FieldInfo, IncidentContext, OwnerInfo

#: Aspects that make up a DatasetContext, by aspect name.
DATASET_ASPECTS: dict[str, type[_Aspect]] = {
    cls.ASPECT_NAME: cls
    for cls in (
        DatasetPropertiesClass,
        SchemaMetadataClass,
        DomainsClass,
        OwnershipClass,
        GlobalTagsClass,
        GlossaryTermsClass,
        StructuredPropertiesClass,
        SubTypesClass,
        UpstreamLineageClass,
    )
}

_V2_ANNOTATION = re.compile(r"\[[^\]]*\]\.?")


def simple_field_path(field_path: str) -> str:
    """``[version=2.0].[type=string].transaction_id`` -> ``transaction_id``."""
    return _V2_ANNOTATION.sub("", field_path)


def _field_type(type_object: object) -> str | None:
    """``StringTypeClass()`` -> ``string``."""
    name = type(type_object).__name__
    return name.removesuffix("TypeClass").lower() if name.endswith("TypeClass") else None


def fields_of(schema: SchemaMetadataClass | None) -> tuple[FieldInfo, ...]:
    if schema is None:
        return ()
    keys = {simple_field_path(path) for path in schema.primaryKeys or []}
    infos = []
    for field in schema.fields:
        name = simple_field_path(field.fieldPath)
        infos.append(
            FieldInfo(
                name=name,
                native_type=field.nativeDataType,
                type=_field_type(field.type.type) if field.type else None,
                is_key=bool(field.isPartOfKey) or name in keys,
            )
        )
    return tuple(infos)


def dataset_context(
    urn: str, aspects: Mapping[str, _Aspect], downstreams: Sequence[str] = ()
) -> DatasetContext:
    """Build the context of ``urn`` from its aspects (any may be missing)."""
    parsed = DatasetUrn.from_string(urn)
    properties = aspects.get(DatasetPropertiesClass.ASPECT_NAME)
    domains = aspects.get(DomainsClass.ASPECT_NAME)
    ownership = aspects.get(OwnershipClass.ASPECT_NAME)
    tags = aspects.get(GlobalTagsClass.ASPECT_NAME)
    terms = aspects.get(GlossaryTermsClass.ASPECT_NAME)
    structured = aspects.get(StructuredPropertiesClass.ASPECT_NAME)
    sub_types = aspects.get(SubTypesClass.ASPECT_NAME)
    lineage = aspects.get(UpstreamLineageClass.ASPECT_NAME)
    return DatasetContext(
        urn=urn,
        name=(properties.name if isinstance(properties, DatasetPropertiesClass) else None)
        or parsed.name,
        platform=parsed.platform.split(":")[-1],
        sub_types=tuple(sub_types.typeNames) if isinstance(sub_types, SubTypesClass) else (),
        domain=domains.domains[0]
        if isinstance(domains, DomainsClass) and domains.domains
        else None,
        fields=fields_of(aspects.get(SchemaMetadataClass.ASPECT_NAME)),  # type: ignore[arg-type]
        owners=tuple(
            OwnerInfo(owner=o.owner, ownership_type=str(o.type))
            for o in (ownership.owners if isinstance(ownership, OwnershipClass) else [])
        ),
        tags=tuple(t.tag for t in tags.tags) if isinstance(tags, GlobalTagsClass) else (),
        glossary_terms=tuple(t.urn for t in terms.terms)
        if isinstance(terms, GlossaryTermsClass)
        else (),
        structured_properties={
            p.propertyUrn: tuple(p.values)
            for p in (
                structured.properties if isinstance(structured, StructuredPropertiesClass) else []
            )
        },
        upstreams=tuple(u.dataset for u in lineage.upstreams)
        if isinstance(lineage, UpstreamLineageClass)
        else (),
        downstreams=tuple(downstreams),
    )


def incident_context(urn: str, info: IncidentInfoClass) -> IncidentContext:
    status = info.status
    return IncidentContext(
        urn=urn,
        title=info.title,
        description=info.description,
        type=str(info.type),
        state=str(status.state),
        resolution_note=status.message,
        entities=tuple(info.entities),
        source_type=str(info.source.type) if info.source else None,
        source_urn=info.source.sourceUrn if info.source else None,
        last_updated_by=status.lastUpdated.actor if status.lastUpdated else None,
    )
