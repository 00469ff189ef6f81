"""The demo estate: datasets, their schemas, owners and lineage, and the people who own them.

This is pure data and the single source of truth for the demo: the snapshot generator derives
its table schemas from it, and the catalog loader turns it into DataHub metadata. It carries no
DataHub import so that both can use it without pulling in the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

PLATFORM = "snowflake"
ENV = "PROD"

Domain = Literal["finance", "marketing", "hr", "logistics", "sales"]
SubType = Literal["Table", "View"]
OwnershipType = Literal["TECHNICAL_OWNER", "BUSINESS_OWNER", "DATA_STEWARD"]


def dataset_urn(name: str) -> str:
    """The DataHub urn of an estate dataset (all live on Snowflake, PROD)."""
    return f"urn:li:dataset:(urn:li:dataPlatform:{PLATFORM},{name},{ENV})"


def user_urn(user_id: str) -> str:
    """The DataHub urn of a corpuser."""
    return f"urn:li:corpuser:{user_id}"


def group_urn(group_id: str) -> str:
    """The DataHub urn of a corpGroup."""
    return f"urn:li:corpGroup:{group_id}"


@dataclass(frozen=True)
class SchemaField:
    name: str
    native_type: str
    is_primary_key: bool = False
    description: str = ""


@dataclass(frozen=True)
class Owner:
    user_id: str
    ownership_type: OwnershipType


@dataclass(frozen=True)
class Dataset:
    name: str
    domain: Domain
    sub_type: SubType
    description: str
    fields: tuple[SchemaField, ...]
    owners: tuple[Owner, ...]
    upstreams: tuple[str, ...] = ()

    @property
    def urn(self) -> str:
        return dataset_urn(self.name)

    @property
    def key_fields(self) -> list[str]:
        """The primary key columns, in schema order (empty when the dataset has no key)."""
        return [field.name for field in self.fields if field.is_primary_key]


@dataclass(frozen=True)
class Group:
    id: str
    display_name: str

    @property
    def urn(self) -> str:
        return group_urn(self.id)


@dataclass(frozen=True)
class User:
    id: str
    display_name: str
    group: str
    leaves_on: date | None = None

    @property
    def urn(self) -> str:
        return user_urn(self.id)

    def is_active_on(self, day: date) -> bool:
        """A leaver is suspended from their leave date on."""
        return self.leaves_on is None or day < self.leaves_on


GROUPS: dict[str, Group] = {
    group.id: group
    for group in (
        Group("finance-data-eng", "Finance Data Engineering"),
        Group("finance-stewards", "Finance Data Stewards"),
        Group("marketing-analytics", "Marketing Analytics"),
        Group("people-ops", "People Operations"),
        Group("logistics-ops", "Logistics Operations"),
        Group("sales-data-eng", "Sales Data Engineering"),
    )
}

USERS: dict[str, User] = {
    user.id: user
    for user in (
        User("alice", "Alice Martin", "finance-stewards"),
        User("bob", "Bob Keller", "finance-data-eng", leaves_on=date(2026, 9, 15)),
        User("carol", "Carol Nguyen", "finance-data-eng"),
        User("dave", "Dave Okafor", "finance-data-eng", leaves_on=date(2026, 10, 20)),
        User("erin", "Erin Sato", "finance-data-eng"),
        User("maria", "Maria Lopez", "marketing-analytics"),
        User("henry", "Henry Brooks", "people-ops"),
        User("leo", "Leo Fischer", "logistics-ops"),
        User("nina", "Nina Petrova", "sales-data-eng"),
        User("omar", "Omar Haddad", "sales-data-eng"),
    )
}


def _key(name: str, native_type: str, description: str = "") -> SchemaField:
    return SchemaField(name, native_type, is_primary_key=True, description=description)


_AMOUNT = SchemaField("amount", "DECIMAL(18,2)", description="Amount in the row's currency.")
_ACCOUNT_ID = SchemaField("account_id", "VARCHAR", description="Customer account.")
_TRANSACTION_ID_DOC = "Payment transaction identifier, as issued by the payment gateway."
#: The storefront's tables: one orders parent, the tables that refer to its orders downstream.
_ORDER_ID_DOC = "The storefront order (a sales.orders order_id)."
_CUSTOMER_ID = SchemaField("customer_id", "VARCHAR", description="The ordering customer.")
_CURRENCY_CODE = SchemaField("currency_code", "VARCHAR", description="ISO 4217 currency code.")
_QUANTITY = SchemaField("quantity", "INTEGER", description="Units of the SKU.")
_SALES_OWNERS = (Owner("nina", "TECHNICAL_OWNER"), Owner("omar", "TECHNICAL_OWNER"))

_ESTATE_DATASETS: tuple[Dataset, ...] = (
    Dataset(
        name="finance.payments",
        domain="finance",
        sub_type="Table",
        description="Card and bank payments as received from the payment gateway, one row per "
        "transaction, loaded in ingestion batches.",
        fields=(
            _key("transaction_id", "VARCHAR", _TRANSACTION_ID_DOC),
            _ACCOUNT_ID,
            _AMOUNT,
            SchemaField("currency", "VARCHAR", description="ISO 4217 currency code."),
            SchemaField("created_at", "TIMESTAMP", description="When the gateway accepted it."),
            SchemaField(
                "ingestion_batch", "BIGINT", description="Loader batch that wrote the row."
            ),
        ),
        owners=(Owner("bob", "TECHNICAL_OWNER"), Owner("alice", "BUSINESS_OWNER")),
    ),
    Dataset(
        name="finance.ledger_entries",
        domain="finance",
        sub_type="Table",
        description="General ledger postings derived from payments, one entry per transaction.",
        fields=(
            _key("transaction_id", "VARCHAR", _TRANSACTION_ID_DOC),
            SchemaField("entry_id", "VARCHAR", description="Ledger entry number."),
            _ACCOUNT_ID,
            _AMOUNT,
            SchemaField("posted_at", "TIMESTAMP", description="When the entry was posted."),
        ),
        owners=(
            Owner("carol", "TECHNICAL_OWNER"),
            Owner("bob", "TECHNICAL_OWNER"),
            Owner("alice", "BUSINESS_OWNER"),
        ),
        upstreams=("finance.payments",),
    ),
    Dataset(
        name="finance.card_settlements",
        domain="finance",
        sub_type="Table",
        description="Card scheme settlements of card payments, exported daily as CSV.",
        fields=(
            _key("transaction_id", "VARCHAR", _TRANSACTION_ID_DOC),
            SchemaField("settlement_id", "VARCHAR", description="Scheme settlement reference."),
            _AMOUNT,
            SchemaField("settled_at", "TIMESTAMP", description="When the scheme settled it."),
        ),
        owners=(Owner("bob", "TECHNICAL_OWNER"), Owner("alice", "DATA_STEWARD")),
        upstreams=("finance.payments",),
    ),
    Dataset(
        name="finance.payouts",
        domain="finance",
        sub_type="Table",
        description="Merchant payouts, each paying out one transaction.",
        fields=(
            _key("payout_id", "VARCHAR", "Payout reference."),
            _key(
                "txn_id", "VARCHAR", "The paid-out transaction (a finance.payments transaction_id)."
            ),
            _AMOUNT,
            SchemaField("paid_at", "TIMESTAMP", description="When the payout was sent."),
        ),
        owners=(Owner("carol", "TECHNICAL_OWNER"), Owner("alice", "DATA_STEWARD")),
        upstreams=("finance.payments",),
    ),
    Dataset(
        name="finance.invoice_lines",
        domain="finance",
        sub_type="Table",
        description="Invoice lines issued to business customers.",
        fields=(
            _key("invoice_id", "VARCHAR", "Invoice number."),
            _key("line_no", "INTEGER", "Line number within the invoice."),
            SchemaField("sku", "VARCHAR", description="Invoiced product."),
            SchemaField("quantity", "INTEGER", description="Units invoiced."),
            _AMOUNT,
        ),
        owners=(Owner("dave", "TECHNICAL_OWNER"), Owner("alice", "BUSINESS_OWNER")),
    ),
    Dataset(
        name="finance.refunds",
        domain="finance",
        sub_type="Table",
        description="Refunds of payments; a transaction may be refunded in several parts.",
        fields=(
            _key("refund_id", "VARCHAR", "Refund reference."),
            SchemaField(
                "transaction_id",
                "VARCHAR",
                description="The refunded transaction; repeats for partial refunds.",
            ),
            _AMOUNT,
            SchemaField("refunded_at", "TIMESTAMP", description="When the refund was issued."),
        ),
        owners=(Owner("erin", "TECHNICAL_OWNER"), Owner("carol", "TECHNICAL_OWNER")),
        upstreams=("finance.payments",),
    ),
    Dataset(
        name="finance.chargebacks",
        domain="finance",
        sub_type="Table",
        description="Chargebacks opened by card schemes, keyed by the scheme's numeric reference.",
        fields=(
            _key("chargeback_id", "VARCHAR", "Chargeback case reference."),
            SchemaField(
                "transaction_id",
                "BIGINT",
                description="The scheme's numeric transaction reference (not the gateway id).",
            ),
            _AMOUNT,
            SchemaField("opened_at", "TIMESTAMP", description="When the case was opened."),
        ),
        owners=(Owner("dave", "TECHNICAL_OWNER"), Owner("erin", "TECHNICAL_OWNER")),
    ),
    Dataset(
        name="finance.fx_rates",
        domain="finance",
        sub_type="Table",
        description="Daily reference exchange rates to EUR.",
        fields=(
            SchemaField("currency", "VARCHAR", description="ISO 4217 currency code."),
            SchemaField("rate_date", "DATE", description="Day the rate applies to."),
            SchemaField("rate", "DECIMAL(18,6)", description="Units of currency per EUR."),
        ),
        owners=(Owner("erin", "TECHNICAL_OWNER"),),
    ),
    Dataset(
        name="finance.gl_balances",
        domain="finance",
        sub_type="Table",
        description="General ledger balances per account and accounting period.",
        fields=(
            SchemaField("account_id", "VARCHAR", description="Ledger account."),
            SchemaField("period", "VARCHAR", description="Accounting period, e.g. 2026-09."),
            SchemaField("balance", "DECIMAL(18,2)", description="Closing balance in EUR."),
        ),
        owners=(Owner("bob", "TECHNICAL_OWNER"), Owner("alice", "BUSINESS_OWNER")),
        upstreams=("finance.ledger_entries",),
    ),
    Dataset(
        name="finance.daily_revenue",
        domain="finance",
        sub_type="View",
        description="Revenue per day, aggregated from the ledger for the finance dashboard.",
        fields=(
            SchemaField("day", "DATE", description="Calendar day."),
            SchemaField("revenue", "DECIMAL(18,2)", description="Posted revenue in EUR."),
        ),
        owners=(Owner("dave", "TECHNICAL_OWNER"), Owner("alice", "BUSINESS_OWNER")),
        upstreams=("finance.ledger_entries",),
    ),
    Dataset(
        name="marketing.web_sessions",
        domain="marketing",
        sub_type="Table",
        description="Website sessions; a session that ended in a purchase carries its transaction.",
        fields=(
            _key("session_id", "VARCHAR", "Web session identifier."),
            SchemaField(
                "transaction_id",
                "VARCHAR",
                description="Purchase made in the session, if any.",
            ),
            SchemaField("landing_page", "VARCHAR", description="First page of the session."),
        ),
        owners=(Owner("maria", "TECHNICAL_OWNER"), Owner("maria", "BUSINESS_OWNER")),
    ),
    Dataset(
        name="hr.employees",
        domain="hr",
        sub_type="Table",
        description="Current and former employees.",
        fields=(
            _key("employee_id", "VARCHAR", "Employee number."),
            SchemaField("name", "VARCHAR", description="Full name."),
            SchemaField("department", "VARCHAR", description="Department."),
        ),
        owners=(Owner("henry", "TECHNICAL_OWNER"),),
    ),
    Dataset(
        name="logistics.shipments",
        domain="logistics",
        sub_type="Table",
        description="Outbound shipments of customer orders.",
        fields=(
            _key("shipment_id", "VARCHAR", "Shipment reference."),
            SchemaField("order_id", "VARCHAR", description="The shipped order."),
            SchemaField("shipped_at", "TIMESTAMP", description="When it left the warehouse."),
        ),
        owners=(Owner("leo", "TECHNICAL_OWNER"), Owner("leo", "DATA_STEWARD")),
    ),
    Dataset(
        name="sales.orders",
        domain="sales",
        sub_type="Table",
        description="Storefront orders, one row per order placed at checkout.",
        fields=(
            _key("order_id", "VARCHAR", "Storefront order number."),
            _CUSTOMER_ID,
            _CURRENCY_CODE,
            SchemaField("amount_minor", "BIGINT", description="Order total in minor units."),
            SchemaField("status", "VARCHAR", description="placed, paid or cancelled."),
            SchemaField("ordered_at", "TIMESTAMP", description="When checkout completed."),
        ),
        owners=_SALES_OWNERS,
    ),
    Dataset(
        name="sales.order_lines",
        domain="sales",
        sub_type="Table",
        description="The lines of each storefront order: one SKU and its quantity per line.",
        fields=(
            _key("order_id", "VARCHAR", _ORDER_ID_DOC),
            _key("line_no", "INTEGER", "Line number within the order."),
            SchemaField("sku", "VARCHAR", description="Stock keeping unit."),
            _QUANTITY,
            SchemaField("unit_price_minor", "BIGINT", description="Unit price in minor units."),
        ),
        owners=_SALES_OWNERS,
        upstreams=("sales.orders",),
    ),
    Dataset(
        name="sales.invoices",
        domain="sales",
        sub_type="Table",
        description="Invoices issued for paid orders, one per order, billed to its customer.",
        fields=(
            _key("invoice_id", "VARCHAR", "Sales invoice number."),
            SchemaField("order_id", "VARCHAR", description=_ORDER_ID_DOC),
            _CUSTOMER_ID,
            _CURRENCY_CODE,
            SchemaField("amount_minor", "BIGINT", description="Invoiced total in minor units."),
            SchemaField("issued_at", "TIMESTAMP", description="When the invoice was issued."),
        ),
        owners=_SALES_OWNERS,
        upstreams=("sales.orders",),
    ),
    Dataset(
        name="sales.returns",
        domain="sales",
        sub_type="Table",
        description="Returned order lines, as booked by the returns desk.",
        fields=(
            _key("return_id", "VARCHAR", "Return authorisation number."),
            SchemaField("order_id", "VARCHAR", description=_ORDER_ID_DOC),
            SchemaField("line_no", "INTEGER", description="The returned line of the order."),
            SchemaField("sku", "VARCHAR", description="Stock keeping unit."),
            _QUANTITY,
            SchemaField("returned_at", "TIMESTAMP", description="When the goods came back."),
        ),
        owners=_SALES_OWNERS,
        upstreams=("sales.order_lines",),
    ),
)

#: Every estate dataset by name, in the order above.
DATASETS: dict[str, Dataset] = {dataset.name: dataset for dataset in _ESTATE_DATASETS}
