"""referential_integrity on PostgreSQL where the parent's column has another type than the
child's: the parent's values are read in the child's type, and PostgreSQL, which has no cast
that fails softly, must never be asked to cast a text that is no value of that type."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reflex_actions.controls import parse_control_spec
from reflex_actions.engines.base import TableTarget
from reflex_actions.engines.postgres import PostgresEngine
from reflex_actions.executor import ReferenceSnapshot, run_control
from tests.engines.postgres_server import PostgresServer, create_table, postgres_server

__all__ = ["postgres_server"]  # the session fixture, used by name below

ORDERS = "urn:li:dataset:(urn:li:dataPlatform:postgres,shop.public.orders,PROD)"
CHILD = [{"order_id": v} for v in (1, 7, 7, 8, 12, None)]


@pytest.fixture
def engine(postgres_server: PostgresServer) -> Iterator[PostgresEngine]:
    engine = PostgresEngine(postgres_server.url())
    yield engine
    engine.close()


def test_an_integer_child_against_a_text_parent_casts_only_numbers(
    postgres_server: PostgresServer, engine: PostgresEngine
) -> None:
    """Only a number's one spelling is that number: '007', ' 8', '7.0' and 'abc' match
    nothing, and none of them is an error."""
    create_table(postgres_server, ("shop", "lines"), CHILD)
    parent = ["1", "007", " 8", "7.0", "12", "abc", "99999999999999999999", None]
    create_table(postgres_server, ("shop", "orders"), [{"id": v} for v in parent])
    orphans = [("7", 2), ("8", 1)]
    control = parse_control_spec(
        {
            "type": "referential_integrity",
            "field": "order_id",
            "references": {"dataset": ORDERS, "field": "id"},
        }
    )
    reference = ReferenceSnapshot(TableTarget("shop.orders"), "given")
    result = run_control(control, TableTarget("shop.lines"), engine=engine, reference=reference)
    assert [(row["missing_parent_value"], row["occurrences"]) for row in result.sample] == orphans
    assert (result.violation_count, result.rows_scanned) == (sum(n for _, n in orphans), 6)
