"""Seeded generator for the demo's snapshot histories, landing snapshots and ownership history.

Backtests need history with known failures, and the live demo needs data that "lands" after it.
Everything is derived from one seed and the estate (schemas, owners, leavers), so regenerating
gives the same tables and the labels stay true to the data by construction: a snapshot is
labelled exactly when the generator injected a failure into it.

Each daily snapshot holds the rows one daily load wrote. All finance tables derive from the same
stream of gateway transactions, and all sales tables from the same stream of storefront orders,
so their ids line up along the lineage (a child row refers to that day's parent rows). A finance
row's time is hours after its transaction's, never days: a load of times only days ahead of it
would be stale (``freshness`` ignores them).
"""

from __future__ import annotations

import csv
import random
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from reflex_actions.demo.estate import DATASETS, USERS, Dataset, Owner
from reflex_actions.kinds.duplicate_rows import DUPLICATE_ROWS
from reflex_actions.kinds.invalid_values import INVALID_VALUES
from reflex_actions.kinds.missing_rows import MISSING_ROWS
from reflex_actions.kinds.missing_values import MISSING_VALUES
from reflex_actions.kinds.orphaned_references import ORPHANED_REFERENCES
from reflex_actions.kinds.schema_change import SCHEMA_CHANGE
from reflex_actions.kinds.stale_data import STALE_DATA
from reflex_actions.snapshots import SnapshotFormat

Row = dict[str, Any]

HISTORY_DAYS: tuple[date, ...] = tuple(date(2026, 9, 1) + timedelta(days=n) for n in range(30))
LANDING_DAY = date(2026, 10, 1)
OWNERSHIP_WEEKS: tuple[date, ...] = tuple(date(2026, 8, 3) + timedelta(weeks=n) for n in range(14))

LANDING_FOLDER = "landing"
OWNERSHIP_FOLDER = "ownership"
LABELS_FILE = "labels.yaml"

PAYMENTS_INCIDENT = "urn:li:incident:reflex-demo-payments-duplicates"
OWNERSHIP_INCIDENT = "urn:li:incident:reflex-demo-orphaned-ownership"
ORDERS_INCIDENT = "urn:li:incident:reflex-demo-orders-missing-customer"
ORDER_LINES_INCIDENT = "urn:li:incident:reflex-demo-order-lines-negative-quantity"
INVOICES_INCIDENT = "urn:li:incident:reflex-demo-invoices-orphaned"
PARTIAL_LOAD_INCIDENT = "urn:li:incident:reflex-demo-payments-partial-load"
RENAMED_COLUMN_INCIDENT = "urn:li:incident:reflex-demo-orders-renamed-amount"
STALE_INCIDENT = "urn:li:incident:reflex-demo-ledger-stale"

#: The loader column a retry rewrites; datasets without it get byte-identical repeated rows.
BATCH_COLUMN = "ingestion_batch"
ROWS_PER_BATCH = 100
CURRENCIES = ("EUR", "USD", "GBP", "CHF")
CURRENCY_WEIGHTS = (60, 25, 10, 5)
SKUS = tuple(f"SKU-{number:04d}" for number in range(1, 61))
LANDING_PAGES = ("/", "/pricing", "/checkout", "/blog/fees", "/signup", "/help/refunds")
ORDER_STATUSES = ("paid", "placed", "cancelled")
ORDER_STATUS_WEIGHTS = (80, 12, 8)
SALES_SKUS = tuple(f"SKU-{number:04d}" for number in range(101, 141))
MAX_LINE_QUANTITY = 10
#: share of storefront orders placed through guest checkout (a customer made at checkout)
GUEST_SHARE = 0.15

_DECIMAL_TYPE = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
_ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "TIMESTAMP": pa.timestamp("us"),
    "DATE": pa.date32(),
}


def arrow_type(native_type: str) -> pa.DataType:
    """The Arrow type a snapshot column gets for an estate field's native (Snowflake) type."""
    decimal = _DECIMAL_TYPE.fullmatch(native_type)
    if decimal:
        return pa.decimal128(int(decimal.group(1)), int(decimal.group(2)))
    return _ARROW_TYPES[native_type]


def arrow_schema(dataset: Dataset) -> pa.Schema:
    """The snapshot schema of an estate dataset, columns in estate order."""
    return pa.schema(
        [pa.field(field.name, arrow_type(field.native_type)) for field in dataset.fields]
    )


@dataclass(frozen=True)
class Streams:
    """One day of the estate's common upstreams: the gateway transactions (of the finance
    tables) and the storefront orders, each with its lines (of the sales tables)."""

    transactions: list[Row]
    orders: list[Row]


@dataclass(frozen=True)
class DayLoad:
    """What a row builder needs for one dataset on one day: its own random stream and that
    day's common upstreams."""

    day: date
    streams: Streams
    rng: random.Random

    @property
    def transactions(self) -> list[Row]:
        return self.streams.transactions

    @property
    def orders(self) -> list[Row]:
        return self.streams.orders


RowBuilder = Callable[[DayLoad], list[Row]]
#: A defect written into one load's rows (drawing on that load's random stream).
Injection = Callable[[list[Row], DayLoad], list[Row]]


@dataclass(frozen=True)
class Failure:
    """A defect injected into one day's load (so labelled a failure), and the incident that
    found it, if any."""

    #: None when the rows are as loaded and the schema broke (a ``SchemaDrift`` of that day)
    inject: Injection | None
    incident: str | None = None
    #: the lesson kind of the defect, written on its label when the table breaks in more
    #: than one way (each kind's control is then scored on its own failures)
    kind: str | None = None


@dataclass(frozen=True)
class History:
    """One dataset's daily history; ``failures`` maps each day whose load was broken to how."""

    dataset: str
    snapshot_format: SnapshotFormat
    build_rows: RowBuilder
    failures: Mapping[date, Failure]

    @property
    def suffix(self) -> str:
        return f".{self.snapshot_format}"


@dataclass(frozen=True)
class SchemaDrift:
    """A column renamed upstream in one snapshot (of the history, or landing on
    ``LANDING_DAY``), so controls on the old name cannot be evaluated there."""

    dataset: str
    day: date
    column: str
    renamed_to: str


@dataclass(frozen=True)
class Handover:
    """A leaver's datasets are given to a successor this long after the leave date."""

    successor: str
    delay: timedelta


#: The checkout release of 2026-09-28 renamed ``sales.orders.amount_minor`` (reverted the
#: next day); billing adopted the new name, so the invoices that land after it lack the column.
RENAMED_AMOUNT_DAY = date(2026, 9, 28)
SCHEMA_DRIFTS: tuple[SchemaDrift, ...] = (
    SchemaDrift("finance.ledger_entries", date(2026, 9, 18), "transaction_id", "txn_ref"),
    SchemaDrift("sales.orders", RENAMED_AMOUNT_DAY, "amount_minor", "amount_cents"),
    SchemaDrift("sales.invoices", LANDING_DAY, "amount_minor", "amount_cents"),
)
HANDOVERS: dict[str, Handover] = {"bob": Handover(successor="carol", delay=timedelta(days=14))}


def renamed_columns(dataset: str, day: date) -> dict[str, str]:
    """The columns of ``dataset``'s snapshot of ``day`` that drifted: old name -> new name."""
    return {
        drift.column: drift.renamed_to
        for drift in SCHEMA_DRIFTS
        if (drift.dataset, drift.day) == (dataset, day)
    }


def _rng(seed: int, stream: str, day: date) -> random.Random:
    """An independent random stream per (dataset, day), so changing one table moves no other."""
    return random.Random(f"{seed}/{stream}/{day.isoformat()}")


def _money(rng: random.Random, low: int, high: int) -> Decimal:
    """A random amount with cents between ``low`` and ``high`` units."""
    return Decimal(rng.randint(low * 100, high * 100)) / 100


def _cents(amount: Decimal) -> Decimal:
    return amount.quantize(Decimal("0.01"))


def _later(moment: datetime, rng: random.Random, min_minutes: int, max_minutes: int) -> datetime:
    return moment + timedelta(minutes=rng.randint(min_minutes, max_minutes))


def _ids(prefix: str, day: date, count: int) -> list[str]:
    """Day-scoped sequential ids such as ``LE-20260901-000001``: unique across the history."""
    stamp = day.strftime("%Y%m%d")
    return [f"{prefix}-{stamp}-{number:06d}" for number in range(1, count + 1)]


def _share(rng: random.Random, rows: list[Row], fraction: float) -> list[Row]:
    """A random subset of ``rows`` in their original order."""
    return [row for row in rows if rng.random() < fraction]


def _gateway_transactions(seed: int, day: date) -> list[Row]:
    """The day's payments as the gateway sent them, in ingestion batches of ROWS_PER_BATCH."""
    rng = _rng(seed, "gateway", day)
    count = rng.randint(500, 700)
    start = datetime(day.year, day.month, day.day)
    seconds = sorted(rng.randrange(86_400) for _ in range(count))
    return [
        {
            "transaction_id": transaction_id,
            "account_id": f"ACC-{rng.randint(1, 400):05d}",
            "amount": _money(rng, 5, 2_500),
            "currency": rng.choices(CURRENCIES, CURRENCY_WEIGHTS)[0],
            "created_at": start + timedelta(seconds=second),
            BATCH_COLUMN: int(f"{day:%Y%m%d}{position // ROWS_PER_BATCH:02d}"),
        }
        for position, (transaction_id, second) in enumerate(
            zip(_ids("TXN", day, count), seconds, strict=True)
        )
    ]


def _payments(load: DayLoad) -> list[Row]:
    return list(load.transactions)


def _ledger_entries(load: DayLoad) -> list[Row]:
    entry_ids = _ids("LE", load.day, len(load.transactions))
    return [
        {
            "transaction_id": txn["transaction_id"],
            "entry_id": entry_id,
            "account_id": txn["account_id"],
            "amount": txn["amount"],
            "posted_at": _later(txn["created_at"], load.rng, 1, 90),
        }
        for entry_id, txn in zip(entry_ids, load.transactions, strict=True)
    ]


def _card_settlements(load: DayLoad) -> list[Row]:
    settled = _share(load.rng, load.transactions, 0.4)
    return [
        {
            "transaction_id": txn["transaction_id"],
            "settlement_id": settlement_id,
            "amount": txn["amount"],
            "settled_at": _later(txn["created_at"], load.rng, 18 * 60, 30 * 60),
        }
        for settlement_id, txn in zip(_ids("CS", load.day, len(settled)), settled, strict=True)
    ]


def _payouts(load: DayLoad) -> list[Row]:
    paid = _share(load.rng, load.transactions, 0.3)
    return [
        {
            "payout_id": payout_id,
            "txn_id": txn["transaction_id"],
            "amount": _cents(txn["amount"] * Decimal("0.985")),
            "paid_at": _later(txn["created_at"], load.rng, 60, 6 * 60),
        }
        for payout_id, txn in zip(_ids("PO", load.day, len(paid)), paid, strict=True)
    ]


def _invoice_lines(load: DayLoad) -> list[Row]:
    rng = load.rng
    rows: list[Row] = []
    for invoice_id in _ids("INV", load.day, rng.randint(120, 160)):
        for line_no in range(1, rng.randint(1, 5) + 1):
            quantity = rng.randint(1, 20)
            rows.append(
                {
                    "invoice_id": invoice_id,
                    "line_no": line_no,
                    "sku": rng.choice(SKUS),
                    "quantity": quantity,
                    "amount": _money(rng, 2, 200) * quantity,
                }
            )
    return rows


def _refunds(load: DayLoad) -> list[Row]:
    """Partial refunds are normal, so a refunded transaction often appears more than once."""
    rng = load.rng
    refunds: list[tuple[Row, int]] = []
    for txn in _share(rng, load.transactions, 0.25):
        parts = rng.choices((1, 2, 3), (6, 3, 1))[0]
        refunds.extend((txn, parts) for _ in range(parts))
    return [
        {
            "refund_id": refund_id,
            "transaction_id": txn["transaction_id"],
            "amount": _cents(txn["amount"] / parts),
            "refunded_at": _later(txn["created_at"], rng, 30, 6 * 60),
        }
        for refund_id, (txn, parts) in zip(_ids("RF", load.day, len(refunds)), refunds, strict=True)
    ]


def _chargebacks(load: DayLoad) -> list[Row]:
    """The scheme references a transaction by a number, not by the gateway's text id."""
    disputed = _share(load.rng, load.transactions, 0.25)
    return [
        {
            "chargeback_id": chargeback_id,
            "transaction_id": int(txn["transaction_id"].replace("TXN-", "").replace("-", "")),
            "amount": txn["amount"],
            "opened_at": _later(txn["created_at"], load.rng, 2 * 60, 12 * 60),
        }
        for chargeback_id, txn in zip(_ids("CB", load.day, len(disputed)), disputed, strict=True)
    ]


def _web_sessions(load: DayLoad) -> list[Row]:
    """Most sessions buy nothing; each purchase belongs to exactly one session."""
    rng = load.rng
    session_ids = _ids("WS", load.day, rng.randint(700, 900))
    purchases = iter(_share(rng, load.transactions, 0.25))
    rows: list[Row] = []
    for session_id in session_ids:
        purchase = next(purchases, None) if rng.random() < 0.3 else None
        rows.append(
            {
                "session_id": session_id,
                "transaction_id": purchase["transaction_id"] if purchase else None,
                "landing_page": rng.choice(LANDING_PAGES),
            }
        )
    return rows


def _storefront_orders(seed: int, day: date) -> list[Row]:
    """The day's storefront orders, each with its lines; ``guest`` marks a guest checkout."""
    rng = _rng(seed, "storefront", day)
    count = rng.randint(120, 180)
    start = datetime(day.year, day.month, day.day)
    seconds = sorted(rng.randrange(86_400) for _ in range(count))
    orders = []
    for order_id, second in zip(_ids("ORD", day, count), seconds, strict=True):
        lines = [
            {
                "line_no": line_no,
                "sku": rng.choice(SALES_SKUS),
                "quantity": rng.choices(range(1, MAX_LINE_QUANTITY + 1), range(10, 0, -1))[0],
                "unit_price_minor": rng.randint(199, 24_999),
            }
            for line_no in range(1, rng.randint(1, 4) + 1)
        ]
        orders.append(
            {
                "order_id": order_id,
                "customer_id": f"CUS-{rng.randint(1, 2_000):05d}",
                "guest": rng.random() < GUEST_SHARE,
                "currency_code": rng.choices(CURRENCIES, CURRENCY_WEIGHTS)[0],
                "status": rng.choices(ORDER_STATUSES, ORDER_STATUS_WEIGHTS)[0],
                "ordered_at": start + timedelta(seconds=second),
                "lines": lines,
            }
        )
    return orders


def _order_total(order: Row) -> int:
    return sum(line["quantity"] * line["unit_price_minor"] for line in order["lines"])


def _orders(load: DayLoad) -> list[Row]:
    return [
        {
            "order_id": order["order_id"],
            "customer_id": order["customer_id"],
            "currency_code": order["currency_code"],
            "amount_minor": _order_total(order),
            "status": order["status"],
            "ordered_at": order["ordered_at"],
        }
        for order in load.orders
    ]


def _order_lines(load: DayLoad) -> list[Row]:
    return [
        {"order_id": order["order_id"], **line} for order in load.orders for line in order["lines"]
    ]


def _paid(orders: list[Row]) -> list[Row]:
    return [order for order in orders if order["status"] == "paid"]


def _invoices_for(orders: list[Row], load: DayLoad, first: int = 0) -> list[Row]:
    """An invoice for each of ``orders``, billed to its customer, numbered from ``first``."""
    ids = _ids("SI", load.day, first + len(orders))[first:]
    return [
        {
            "invoice_id": invoice_id,
            "order_id": order["order_id"],
            "customer_id": order["customer_id"],
            "currency_code": order["currency_code"],
            "amount_minor": _order_total(order),
            "issued_at": _later(order["ordered_at"], load.rng, 5, 120),
        }
        for invoice_id, order in zip(ids, orders, strict=True)
    ]


def _invoices(load: DayLoad) -> list[Row]:
    """One invoice per paid order."""
    return _invoices_for(_paid(load.orders), load)


def _returns(load: DayLoad) -> list[Row]:
    """A few lines of paid orders come back, some of their units or all."""
    returned = [
        (order, line)
        for order in _paid(load.orders)
        for line in order["lines"]
        if load.rng.random() < 0.06
    ]
    return [
        {
            "return_id": return_id,
            "order_id": order["order_id"],
            "line_no": line["line_no"],
            "sku": line["sku"],
            "quantity": load.rng.randint(1, line["quantity"]),
            "returned_at": _later(order["ordered_at"], load.rng, 2 * 24 * 60, 6 * 24 * 60),
        }
        for return_id, (order, line) in zip(
            _ids("RMA", load.day, len(returned)), returned, strict=True
        )
    ]


def _september(*days: int) -> tuple[date, ...]:
    return tuple(date(2026, 9, day) for day in days)


def _replay_batch(rows: list[Row], load: DayLoad) -> list[Row]:
    """A non-idempotent retry: one batch of the load is written a second time, after the rest.

    Where the loader records its batch, the replayed rows carry a new, later batch number;
    elsewhere they are exact copies.
    """
    rng = load.rng
    if BATCH_COLUMN in rows[0]:
        batches = sorted({row[BATCH_COLUMN] for row in rows})
        retried, retry_batch = rng.choice(batches), batches[-1] + 1
        return rows + [
            {**row, BATCH_COLUMN: retry_batch} for row in rows if row[BATCH_COLUMN] == retried
        ]
    size = min(rng.randint(20, 60), len(rows))
    start = rng.randrange(len(rows) - size + 1)
    return rows + [dict(row) for row in rows[start : start + size]]


def _partial_load(rows: list[Row], load: DayLoad) -> list[Row]:
    """A loader that timed out half-way and committed what it had: the first half of the
    day's rows, in load order (each one intact)."""
    return rows[: len(rows) // 2]


def _loaded_days_before(days: int) -> Injection:
    """A loader that stopped ``days`` days ago: the table still holds the rows it loaded
    then (every time in them ``days`` days older than the day's)."""
    shift = timedelta(days=days)

    def stale(rows: list[Row], load: DayLoad) -> list[Row]:
        return [
            {
                key: value - shift if isinstance(value, datetime) else value
                for key, value in row.items()
            }
            for row in rows
        ]

    return stale


def _guests_without_customer(rows: list[Row], load: DayLoad) -> list[Row]:
    """Guest checkouts written before their customer existed: ``customer_id`` is NULL on the
    rows of guest orders (and on every table that copies it from them)."""
    guests = {order["order_id"] for order in load.orders if order["guest"]}
    return [{**row, "customer_id": None} if row["order_id"] in guests else row for row in rows]


def _removed_items_as_lines(rows: list[Row], load: DayLoad) -> list[Row]:
    """Items taken out of a cart, loaded as extra lines with quantity -1 after the order's
    own lines."""
    removed: list[Row] = []
    for order in load.orders:
        if load.rng.random() < 0.1:
            line = load.rng.choice(order["lines"])
            removed.append(
                {**line, "order_id": order["order_id"], "line_no": len(order["lines"]) + 1}
            )
    return rows + [{**line, "quantity": -1} for line in removed]


def _returned_quantity_negated(rows: list[Row], load: DayLoad) -> list[Row]:
    """The returns desk's booking tool writes some returned quantities with a minus sign."""
    return [
        {**row, "quantity": -row["quantity"]} if load.rng.random() < 0.2 else row for row in rows
    ]


def _rolled_back_orders(load: DayLoad, share: float) -> list[Row]:
    """Paid orders checkout rolled back after payment: they never reach ``sales.orders`` (their
    ids follow the day's own), but a reader of a stale replica still sees them."""
    paid = _paid(load.orders)
    count = max(1, round(len(paid) * share))
    ids = _ids("ORD", load.day, len(load.orders) + count)[len(load.orders) :]
    return [{**order, "order_id": order_id} for order_id, order in zip(ids, paid, strict=False)]


def _invoices_of_rolled_back_orders(rows: list[Row], load: DayLoad) -> list[Row]:
    """Billing read a stale replica and invoiced orders checkout had rolled back."""
    return rows + _invoices_for(_rolled_back_orders(load, 0.06), load, first=len(rows))


def _lines_of_rolled_back_orders(rows: list[Row], load: DayLoad) -> list[Row]:
    """The order pipeline replayed from the same stale replica: lines of rolled-back orders."""
    return rows + [
        {"order_id": order["order_id"], **line}
        for order in _rolled_back_orders(load, 0.04)
        for line in order["lines"]
    ]


def _retries(days: Mapping[date, str | None]) -> dict[date, Failure]:
    """Days whose load was retried non-idempotently, each with the incident that found it."""
    return {day: Failure(_replay_batch, incident, DUPLICATE_ROWS) for day, incident in days.items()}


#: The guest-checkout release of 2026-09-17 wrote orders (and so their invoices) without one.
MISSING_CUSTOMER_DAY = date(2026, 9, 17)
#: The cart-service release of 2026-09-24 sent removed items as order lines.
NEGATIVE_QUANTITY_DAY = date(2026, 9, 24)
#: On 2026-09-20 billing read a stale replica and invoiced orders that had been rolled back.
ROLLED_BACK_DAY = date(2026, 9, 20)
#: On 2026-09-14 the payments loader timed out half-way and committed half the day.
PARTIAL_LOAD_DAY = date(2026, 9, 14)
#: The ledger posting job stopped after 2026-09-15: the table held that day's rows until the
#: job was restarted on 2026-09-19 (day -> how many days old its rows were).
STALE_LEDGER = {date(2026, 9, 17): 2, date(2026, 9, 18): 3}

HISTORIES: tuple[History, ...] = (
    History(
        "finance.payments",
        "parquet",
        _payments,
        {
            **_retries({date(2026, 9, 9): PAYMENTS_INCIDENT, date(2026, 9, 22): None}),
            PARTIAL_LOAD_DAY: Failure(_partial_load, PARTIAL_LOAD_INCIDENT, MISSING_ROWS),
        },
    ),
    History(
        "finance.ledger_entries",
        "parquet",
        _ledger_entries,
        {
            **_retries(dict.fromkeys(_september(12, 25))),
            **{
                day: Failure(_loaded_days_before(days), STALE_INCIDENT, STALE_DATA)
                for day, days in STALE_LEDGER.items()
            },
        },
    ),
    History(
        "finance.card_settlements",
        "csv",
        _card_settlements,
        _retries(dict.fromkeys(_september(4, 16))),
    ),
    History("finance.payouts", "parquet", _payouts, _retries(dict.fromkeys(_september(27)))),
    History(
        "finance.invoice_lines", "parquet", _invoice_lines, _retries(dict.fromkeys(_september(11)))
    ),
    History("finance.refunds", "parquet", _refunds, {}),
    History("finance.chargebacks", "parquet", _chargebacks, {}),
    History("marketing.web_sessions", "parquet", _web_sessions, {}),
    History(
        "sales.orders",
        "parquet",
        _orders,
        {
            MISSING_CUSTOMER_DAY: Failure(
                _guests_without_customer, ORDERS_INCIDENT, MISSING_VALUES
            ),
            RENAMED_AMOUNT_DAY: Failure(None, RENAMED_COLUMN_INCIDENT, SCHEMA_CHANGE),
        },
    ),
    History(
        "sales.order_lines",
        "parquet",
        _order_lines,
        {
            NEGATIVE_QUANTITY_DAY: Failure(
                _removed_items_as_lines, ORDER_LINES_INCIDENT, INVALID_VALUES
            )
        },
    ),
    History(
        "sales.invoices",
        "parquet",
        _invoices,
        {
            MISSING_CUSTOMER_DAY: Failure(_guests_without_customer, kind=MISSING_VALUES),
            ROLLED_BACK_DAY: Failure(
                _invoices_of_rolled_back_orders, INVOICES_INCIDENT, ORPHANED_REFERENCES
            ),
        },
    ),
    History("sales.returns", "parquet", _returns, {}),
)

#: Snapshots landing after the history, for the live demo: dataset -> the defect in its load.
#: The orders land clean, so a child landed that day has its parent's snapshot of the same id.
LANDINGS: dict[str, Injection | None] = {
    "finance.payments": None,
    "finance.card_settlements": None,
    "finance.refunds": _partial_load,
    "finance.ledger_entries": _replay_batch,
    "sales.orders": None,
    "sales.order_lines": _lines_of_rolled_back_orders,
    "sales.invoices": _guests_without_customer,
    "sales.returns": _returned_quantity_negated,
}


def _snapshot_table(
    history: History, seed: int, day: date, streams: Streams, inject: Injection | None
) -> pa.Table:
    load = DayLoad(day=day, streams=streams, rng=_rng(seed, history.dataset, day))
    rows = history.build_rows(load)
    if inject is not None:
        rows = inject(rows, load)
    table = pa.Table.from_pylist(rows, schema=arrow_schema(DATASETS[history.dataset]))
    renamed = renamed_columns(history.dataset, day)
    return table.rename_columns([renamed.get(name, name) for name in table.column_names])


def write_snapshot(table: pa.Table, path: Path) -> None:
    """Parquet, or CSV as an export job writes it: header row, values quoted only where
    needed, NULL as an empty field. Parquet files carry no extra Arrow schema blob: Parquet's
    own logical types hold every type the estate uses, and the blob dominated the write time."""
    if path.suffix == ".parquet":
        pq.write_table(table, path, compression="zstd", store_schema=False)
        return
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(table.column_names)
        for row in table.to_pylist():
            writer.writerow("" if value is None else value for value in row.values())


def _write_labels(folder: Path, failures: list[tuple[date, str | None, str | None]]) -> None:
    """labels.yaml as in DESIGN §5 from (day, incident, kind); snapshot ids are quoted so YAML
    keeps them as text."""
    entries = [
        day.isoformat()
        if incident is None and kind is None
        else {
            "snapshot": day.isoformat(),
            **({"incident": incident} if incident else {}),
            **({"kind": kind} if kind else {}),
        }
        for day, incident, kind in failures
    ]
    header = "# Snapshots known to hold a failure. Generated by reflex_actions.demo.history.\n"
    text = yaml.safe_dump({"failures": entries}, sort_keys=False)
    (folder / LABELS_FILE).write_text(header + text, encoding="utf-8")


def _fresh_folder(folder: Path) -> Path:
    """Empty ``folder`` so no snapshot from an earlier run survives a regeneration."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def _holder(owner: Owner, week: date) -> Owner:
    """Who holds an ownership edge that week: a leaver's edges pass to the successor once the
    handover is due; until then they stay with the (suspended) leaver."""
    leaves_on = USERS[owner.user_id].leaves_on
    handover = HANDOVERS.get(owner.user_id)
    if handover is None or leaves_on is None or week < leaves_on + handover.delay:
        return owner
    return Owner(handover.successor, owner.ownership_type)


def owners_on(dataset: Dataset, week: date) -> list[Owner]:
    """The dataset's distinct owners that week."""
    return list(dict.fromkeys(_holder(owner, week) for owner in dataset.owners))


def ownership_edges(week: date) -> list[Row]:
    """One row per dataset-owner edge; a dataset without owners appears once with empty fields."""
    rows: list[Row] = []
    for dataset in DATASETS.values():
        owners = owners_on(dataset, week)
        rows.extend(
            {
                "dataset_urn": dataset.urn,
                "owner_urn": USERS[owner.user_id].urn,
                "ownership_type": owner.ownership_type,
                "owner_status": "ACTIVE"
                if USERS[owner.user_id].is_active_on(week)
                else "SUSPENDED",
            }
            for owner in owners
        )
        if not owners:
            rows.append(
                {
                    "dataset_urn": dataset.urn,
                    "owner_urn": None,
                    "ownership_type": None,
                    "owner_status": None,
                }
            )
    return rows


def _has_orphan(edges: list[Row]) -> bool:
    """Whether some dataset has no active technical owner left."""
    covered = {
        edge["dataset_urn"]
        for edge in edges
        if edge["ownership_type"] == "TECHNICAL_OWNER" and edge["owner_status"] == "ACTIVE"
    }
    return any(edge["dataset_urn"] not in covered for edge in edges)


def _write_ownership_history(folder: Path) -> None:
    orphaned_weeks: list[date] = []
    for week in OWNERSHIP_WEEKS:
        edges = ownership_edges(week)
        write_snapshot(pa.Table.from_pylist(edges), folder / f"{week.isoformat()}.csv")
        if _has_orphan(edges):
            orphaned_weeks.append(week)
    incidents = [OWNERSHIP_INCIDENT] + [None] * (len(orphaned_weeks) - 1)
    _write_labels(
        folder,
        [(week, incident, None) for week, incident in zip(orphaned_weeks, incidents, strict=True)],
    )


def landing_snapshot(out_dir: Path, dataset: str) -> Path:
    """Where the snapshot of ``dataset`` that lands on the landing day is, under ``out_dir``."""
    history = next(history for history in HISTORIES if history.dataset == dataset)
    return out_dir / LANDING_FOLDER / dataset / f"{LANDING_DAY.isoformat()}{history.suffix}"


def generate_histories(out_dir: Path, seed: int = 7) -> dict[str, Path]:
    """Write (overwriting) every history, the landing snapshots and the ownership history under
    ``out_dir``; return each history dataset's folder by dataset name."""
    streams = {
        day: Streams(_gateway_transactions(seed, day), _storefront_orders(seed, day))
        for day in (*HISTORY_DAYS, LANDING_DAY)
    }
    histories = {history.dataset: history for history in HISTORIES}
    folders: dict[str, Path] = {}
    for history in HISTORIES:
        folder = _fresh_folder(out_dir / history.dataset)
        for day in HISTORY_DAYS:
            failure = history.failures.get(day)
            inject = failure.inject if failure else None
            table = _snapshot_table(history, seed, day, streams[day], inject)
            write_snapshot(table, folder / f"{day.isoformat()}{history.suffix}")
        labels = [
            (day, failure.incident, failure.kind)
            for day, failure in sorted(history.failures.items())
        ]
        _write_labels(folder, labels)
        folders[history.dataset] = folder
    _fresh_folder(out_dir / LANDING_FOLDER)
    for dataset, inject in LANDINGS.items():
        history = histories[dataset]
        table = _snapshot_table(history, seed, LANDING_DAY, streams[LANDING_DAY], inject)
        path = landing_snapshot(out_dir, dataset)
        path.parent.mkdir()
        write_snapshot(table, path)
    _write_ownership_history(_fresh_folder(out_dir / OWNERSHIP_FOLDER))
    return folders


#: Where the demo's "today" loads are written, beside each dataset's landing-day snapshot.
TODAY = "today"
#: The loader that has stopped by "today", and how many days before today it last loaded.
STOPPED_LOADER = ("finance.payouts", 6)


def todays_load(out_dir: Path, dataset: str, now: datetime, seed: int = 7) -> Path:
    """A clean load of ``dataset`` today: the generator's landing-day rows with every time
    moved to today — except the stopped loader's, which stay as many days behind as it has
    stopped — written as Parquet beside the landing-day snapshot."""
    history = next(history for history in HISTORIES if history.dataset == dataset)
    streams = Streams(
        _gateway_transactions(seed, LANDING_DAY), _storefront_orders(seed, LANDING_DAY)
    )
    table = _snapshot_table(history, seed, LANDING_DAY, streams, None)
    stopped_days = STOPPED_LOADER[1] if dataset == STOPPED_LOADER[0] else 0
    day_end = datetime.combine(LANDING_DAY + timedelta(days=1), datetime.min.time())
    shift = pa.scalar(now - day_end - timedelta(days=stopped_days))
    columns = [
        pc.add(column, shift) if pa.types.is_timestamp(column.type) else column
        for column in table.columns
    ]
    path = landing_snapshot(out_dir, dataset).with_name(f"{TODAY}.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, names=table.column_names), path)
    return path
