"""Aspect builders shared by the catalog tests."""

from __future__ import annotations

from datahub.metadata.schema_classes import (
    OtherSchemaClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
)


def field(path: str, native: str, type_class: object, key: bool = False) -> SchemaFieldClass:
    return SchemaFieldClass(
        fieldPath=path,
        nativeDataType=native,
        type=SchemaFieldDataTypeClass(type_class),
        isPartOfKey=key,
    )


def schema(*fields: SchemaFieldClass, keys: list[str] | None = None) -> SchemaMetadataClass:
    return SchemaMetadataClass(
        schemaName="t",
        platform="urn:li:dataPlatform:snowflake",
        version=0,
        hash="",
        platformSchema=OtherSchemaClass(rawSchema=""),
        fields=list(fields),
        primaryKeys=keys,
    )
