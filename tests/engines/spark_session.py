"""One local Spark session for the whole test run (DESIGN §6: engines run for real).

A JVM takes 10-15 s to start on two cores, so every test module needing Spark imports the
``spark`` fixture from here and shares one session: two local cores, two shuffle partitions
(the default 200 would make every tiny aggregation 200 tasks), no web UI, the driver on
loopback, its tables in a temporary warehouse (the engine's builder sets its clock to UTC).
The same driver serves Spark Connect on a free loopback port (Spark's ``SparkConnectPlugin``,
as a cluster's driver runs it): a Connect client's tests pay for no second JVM.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from reflex_actions.engines.spark import session_builder
from tests.ports import free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The session once started: a fixture imported into several modules is one fixture per
#: module, and each must find the same session.
_STARTED: list[SparkSession] = []


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    if not _STARTED:
        # the address Spark finds for this host's name otherwise (not a loopback one)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        scratch = tmp_path_factory.mktemp("spark")
        builder = (
            session_builder(warehouse=scratch / "warehouse")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.local.dir", str(scratch / "local"))
            .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
            .config("spark.connect.grpc.binding.address", "127.0.0.1")
            .config("spark.connect.grpc.binding.port", str(free_port()))
        )
        _STARTED.append(builder.getOrCreate())
        _STARTED[0].sparkContext.setLogLevel("ERROR")
    yield _STARTED[0]
    _STARTED[0].stop()
    # py4j logs its connections' close from __del__ at interpreter exit, after pytest has
    # closed the streams its handlers write to: nothing left worth logging
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


@pytest.fixture(scope="session")
def spark_connect_url(spark: SparkSession) -> str:
    """The ``sc://`` URL of the run's Spark Connect server (the local session's driver)."""
    return f"sc://127.0.0.1:{spark.conf.get('spark.connect.grpc.binding.port')}"
