"""Fixtures: a registry served in process over a SQLite file in tmp_path, with a recording ingestor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cebroker.registry.component import RegistryComponent
from registry.support import BASE, DOCUMENT_SCHEMA, RecordingIngestor, make_client


@pytest.fixture
def ingestor() -> RecordingIngestor:
    return RecordingIngestor()


@pytest.fixture
def component(tmp_path: Path, ingestor: RecordingIngestor) -> RegistryComponent:
    schema = DOCUMENT_SCHEMA if DOCUMENT_SCHEMA.exists() else None
    return RegistryComponent(tmp_path / "cebroker.db", BASE, ingestor=ingestor, document_schema=schema)


@pytest.fixture
def client(component: RegistryComponent) -> Iterator[TestClient]:
    with make_client(component) as c:
        yield c
