"""Loopback ports for the servers the tests start (PostgreSQL, Spark Connect, the Kafka broker)."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on at the moment, on the loopback interface."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])
