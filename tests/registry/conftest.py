"""Fixtures: a registry served in process over a SQLite file in tmp_path, with a recording ingestor."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline.servers import ServedApps, Sink, served_sink
from starlette.testclient import TestClient
from support.shared import XREGISTRY_SAMPLES

from cebroker.app import create_app
from cebroker.registry.component import RegistryComponent
from cebroker.settings import Settings
from cebroker.storage import Storage, create_storage
from registry.support import BASE, DOCUMENT_SCHEMA, Broker, RecordingIngestor, make_client


@pytest.fixture
def ingestor() -> RecordingIngestor:
    return RecordingIngestor()


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    """The (unopened) storage of the ``component`` fixture; ``client`` opens it."""
    return create_storage(tmp_path / "cebroker.db")


@pytest.fixture
def component(storage: Storage, ingestor: RecordingIngestor) -> RegistryComponent:
    # The spec's document schema when the samples are there; the few tests that depend on it
    # being applied are marked as needing the samples, the others hold with or without it.
    schema = DOCUMENT_SCHEMA if XREGISTRY_SAMPLES.present else None
    return RegistryComponent(storage.registry, BASE, ingestor=ingestor, document_schema=schema)


@pytest.fixture
def client(component: RegistryComponent, storage: Storage) -> Iterator[TestClient]:
    with make_client(component, storage) as c:
        yield c


@pytest.fixture
def sink() -> Iterator[Sink]:
    """A recording HTTP sink on a free port."""
    with served_sink() as recorder:
        yield recorder


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Start whole brokers (every component) on free ports; each gets its own database."""
    served = ServedApps()

    def make(**overrides: Any) -> Broker:
        settings = Settings(
            **{"db": tmp_path / f"broker{len(served)}.db", "webhook_validation": False, **overrides}
        )
        return Broker(*served.start(create_app(settings)))

    yield make
    served.close()
