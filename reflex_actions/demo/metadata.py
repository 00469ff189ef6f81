"""The demo estate as DataHub metadata: the MCP file `datahub ingest` and `load` read.

Built from ``estate.py`` so the catalog and the snapshot histories describe the same datasets.
The state is the estate's on the landing day: bob has left and handed over, dave has not left
yet, and the incidents the demo resolves (one per scenario) are still ACTIVE. Timestamps are
fixed, so the file is byte-for-byte reproducible.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path

from datahub.emitter.mce_builder import make_domain_urn
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.sink.file import write_metadata_file
from datahub.metadata.schema_classes import (
    AuditStampClass,
    BooleanTypeClass,
    CorpGroupInfoClass,
    CorpUserInfoClass,
    CorpUserStatusClass,
    DatasetLineageTypeClass,
    DatasetPropertiesClass,
    DateTypeClass,
    DomainPropertiesClass,
    DomainsClass,
    GroupMembershipClass,
    IncidentInfoClass,
    IncidentStateClass,
    IncidentStatusClass,
    IncidentTypeClass,
    NumberTypeClass,
    OtherSchemaClass,
    OwnerClass,
    OwnershipClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StatusClass,
    StringTypeClass,
    SubTypesClass,
    TimeTypeClass,
    UpstreamClass,
    UpstreamLineageClass,
)

from reflex_actions.demo.estate import DATASETS, GROUPS, PLATFORM, USERS, Dataset, User
from reflex_actions.demo.history import (
    INVOICES_INCIDENT,
    LANDING_DAY,
    MISSING_CUSTOMER_DAY,
    NEGATIVE_QUANTITY_DAY,
    ORDER_LINES_INCIDENT,
    ORDERS_INCIDENT,
    OWNERSHIP_INCIDENT,
    PARTIAL_LOAD_DAY,
    PARTIAL_LOAD_INCIDENT,
    PAYMENTS_INCIDENT,
    RENAMED_AMOUNT_DAY,
    RENAMED_COLUMN_INCIDENT,
    ROLLED_BACK_DAY,
    STALE_INCIDENT,
    STALE_LEDGER,
    owners_on,
)

ESTATE_FILE = Path(__file__).with_name("estate.mcp.json")
SYSTEM_ACTOR = "urn:li:corpuser:datahub"
ESTATE_CREATED = date(2026, 8, 1)


def _millis(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, 9, tzinfo=timezone.utc).timestamp() * 1000)


def _stamp(day: date, actor: str = SYSTEM_ACTOR) -> AuditStampClass:
    return AuditStampClass(time=_millis(day), actor=actor)


def datahub_field_type(native_type: str) -> SchemaFieldDataTypeClass:
    """The DataHub type class of a native SQL type (number, date, time, boolean or string)."""
    native = native_type.upper()
    if native.startswith(("DECIMAL", "BIGINT", "INT", "DOUBLE", "FLOAT", "NUMBER")):
        return SchemaFieldDataTypeClass(NumberTypeClass())
    if native == "DATE":
        return SchemaFieldDataTypeClass(DateTypeClass())
    if native.startswith("TIMESTAMP"):
        return SchemaFieldDataTypeClass(TimeTypeClass())
    if native == "BOOLEAN":
        return SchemaFieldDataTypeClass(BooleanTypeClass())
    return SchemaFieldDataTypeClass(StringTypeClass())


def _dataset_mcps(dataset: Dataset, as_of: date) -> list[MetadataChangeProposalWrapper]:
    schema = SchemaMetadataClass(
        schemaName=dataset.name,
        platform=f"urn:li:dataPlatform:{PLATFORM}",
        version=0,
        hash="",
        platformSchema=OtherSchemaClass(rawSchema=""),
        fields=[
            SchemaFieldClass(
                fieldPath=field.name,
                nativeDataType=field.native_type,
                type=datahub_field_type(field.native_type),
                description=field.description or None,
                isPartOfKey=field.is_primary_key,
            )
            for field in dataset.fields
        ],
        primaryKeys=dataset.key_fields or None,
    )
    aspects = [
        StatusClass(removed=False),
        DatasetPropertiesClass(name=dataset.name, description=dataset.description),
        SubTypesClass(typeNames=[dataset.sub_type]),
        schema,
        DomainsClass(domains=[make_domain_urn(dataset.domain)]),
        OwnershipClass(
            owners=[
                OwnerClass(owner=USERS[owner.user_id].urn, type=owner.ownership_type)
                for owner in owners_on(dataset, as_of)
            ],
            lastModified=_stamp(as_of),
        ),
    ]
    if dataset.upstreams:
        aspects.append(
            UpstreamLineageClass(
                upstreams=[
                    UpstreamClass(
                        dataset=DATASETS[name].urn, type=DatasetLineageTypeClass.TRANSFORMED
                    )
                    for name in dataset.upstreams
                ]
            )
        )
    return [MetadataChangeProposalWrapper(entityUrn=dataset.urn, aspect=a) for a in aspects]


def _user_status(user: User, as_of: date) -> CorpUserStatusClass:
    if user.leaves_on is None or user.is_active_on(as_of):
        return CorpUserStatusClass(status="ACTIVE", lastModified=_stamp(ESTATE_CREATED))
    return CorpUserStatusClass(status="SUSPENDED", lastModified=_stamp(user.leaves_on))


def _people_mcps(as_of: date) -> list[MetadataChangeProposalWrapper]:
    mcps = [
        MetadataChangeProposalWrapper(
            entityUrn=group.urn,
            aspect=CorpGroupInfoClass(
                displayName=group.display_name, admins=[], members=[], groups=[]
            ),
        )
        for group in GROUPS.values()
    ]
    for user in USERS.values():
        mcps += [
            MetadataChangeProposalWrapper(
                entityUrn=user.urn,
                aspect=CorpUserInfoClass(active=True, displayName=user.display_name),
            ),
            MetadataChangeProposalWrapper(entityUrn=user.urn, aspect=_user_status(user, as_of)),
            MetadataChangeProposalWrapper(
                entityUrn=user.urn, aspect=GroupMembershipClass(groups=[GROUPS[user.group].urn])
            ),
        ]
    return mcps


def _incident(
    urn: str, day: date, dataset: str, title: str, description: str
) -> MetadataChangeProposalWrapper:
    return MetadataChangeProposalWrapper(
        entityUrn=urn,
        aspect=IncidentInfoClass(
            type=IncidentTypeClass.OPERATIONAL,
            title=title,
            description=description,
            entities=[DATASETS[dataset].urn],
            status=IncidentStatusClass(
                state=IncidentStateClass.ACTIVE, lastUpdated=_stamp(day, USERS["alice"].urn)
            ),
            created=_stamp(day, USERS["alice"].urn),
            startedAt=_millis(day),
        ),
    )


def incidents() -> list[MetadataChangeProposalWrapper]:
    """The incidents the demo resolves (incident A of each scenario). Built anew on each
    call: writers (DataHub Lite among them) fill in an MCP's system metadata in place."""
    return [
        _incident(
            PAYMENTS_INCIDENT,
            date(2026, 9, 9),
            "finance.payments",
            "Duplicate transactions in finance.payments",
            "The daily revenue report was overstated on 2026-09-09: finance.payments holds 100 "
            "transaction_id values twice. The loader timed out, retried the batch, and re-inserted "
            "rows that had already been committed.",
        ),
        _incident(
            OWNERSHIP_INCIDENT,
            date(2026, 9, 21),
            "finance.payments",
            "finance.payments has no active technical owner",
            "bob left the company on 2026-09-15 and was the only technical owner of "
            "finance.payments. A failed load on 2026-09-20 had nobody to page, and nobody could "
            "approve a schema change.",
        ),
        _incident(
            ORDERS_INCIDENT,
            MISSING_CUSTOMER_DAY,
            "sales.orders",
            "Orders without a customer in sales.orders",
            "On 2026-09-17 the guest-checkout release wrote orders before their customer record "
            "existed: sales.orders holds guest orders whose customer_id is NULL, so the CRM "
            "export skipped them and no order confirmation went out.",
        ),
        _incident(
            ORDER_LINES_INCIDENT,
            NEGATIVE_QUANTITY_DAY,
            "sales.order_lines",
            "Negative quantities in sales.order_lines",
            "Units sold per SKU dropped on 2026-09-24: the cart service sent items taken out of "
            "a cart as order lines with quantity -1, and the order pipeline loaded them.",
        ),
        _incident(
            INVOICES_INCIDENT,
            ROLLED_BACK_DAY,
            "sales.invoices",
            "Orphaned invoices in sales.invoices",
            "Finance could not match invoices of 2026-09-20 to any order: billing read a stale "
            "replica after checkout rolled back a batch of paid orders, so the invoices point "
            "at missing orders.",
        ),
        _incident(
            PARTIAL_LOAD_INCIDENT,
            PARTIAL_LOAD_DAY,
            "finance.payments",
            "Partial load of finance.payments",
            "Revenue for 2026-09-14 came in at half its usual level: the payments loader timed "
            "out half-way through the day's file and committed what it had, a partial load with "
            "half the rows missing. Nothing failed, so nobody noticed until the month-end close.",
        ),
        _incident(
            RENAMED_COLUMN_INCIDENT,
            RENAMED_AMOUNT_DAY,
            "sales.orders",
            "Breaking schema change in sales.orders",
            "The sales dashboard showed no order totals for 2026-09-28: the checkout release "
            "renamed the column amount_minor to amount_cents in sales.orders, and every report "
            "reading amount_minor broke. The release was reverted the next day.",
        ),
        _incident(
            STALE_INCIDENT,
            max(STALE_LEDGER),
            "finance.ledger_entries",
            "Stale ledger in finance.ledger_entries",
            "Finance closed the books against a stale ledger on 2026-09-17 and 2026-09-18: the "
            "ledger posting job had silently stopped after 2026-09-15, so the table still held "
            "two- and three-day-old entries and nothing alerted.",
        ),
    ]


DOMAINS = {
    "finance": "Finance",
    "marketing": "Marketing",
    "hr": "HR",
    "logistics": "Logistics",
    "sales": "Sales",
}
#: who answers for each domain: where a replacement owner is looked for first
DOMAIN_OWNERS = {
    "finance": (("carol", "TECHNICAL_OWNER"), ("alice", "DATA_STEWARD")),
    "marketing": (("maria", "TECHNICAL_OWNER"),),
}


def estate_mcps(as_of: date = LANDING_DAY) -> list[MetadataChangeProposalWrapper]:
    """All metadata of the demo estate on ``as_of``."""
    mcps = [
        MetadataChangeProposalWrapper(
            entityUrn=make_domain_urn(domain), aspect=DomainPropertiesClass(name=name)
        )
        for domain, name in DOMAINS.items()
    ]
    mcps += [
        MetadataChangeProposalWrapper(
            entityUrn=make_domain_urn(domain),
            aspect=OwnershipClass(
                owners=[OwnerClass(owner=USERS[u].urn, type=t) for u, t in owners],
                lastModified=_stamp(ESTATE_CREATED),
            ),
        )
        for domain, owners in DOMAIN_OWNERS.items()
    ]
    for dataset in DATASETS.values():
        mcps += _dataset_mcps(dataset, as_of)
    return [*mcps, *_people_mcps(as_of), *incidents()]


def write_estate_file(path: Path = ESTATE_FILE) -> Path:
    """Write the estate as an MCP JSON file (what `datahub ingest` with the file source reads)."""
    write_metadata_file(path, estate_mcps())
    return path


if __name__ == "__main__":
    print(write_estate_file())
