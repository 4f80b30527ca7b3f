"""Fixtures: a registry served in process over a SQLite file in tmp_path, with a recording ingestor
(the recording sink and whole brokers come from the suite's fixtures, tests/support/fixtures.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support.shared import XREGISTRY_SAMPLES

from cebroker.registry.component import RegistryComponent
from cebroker.storage import Storage, create_storage
from registry.support import BASE, DOCUMENT_SCHEMA, RecordingIngestor, make_client


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
