"""Fixtures: a registry served in process over a SQLite file in tmp_path, with a recording ingestor."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cebroker.pipeline.contracts import Event, IngestResult
from cebroker.registry.component import RegistryComponent

BASE = "http://testserver"
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
SAMPLES = SHARED / "conformance" / "xregistry-samples" / "xregistry-spec"
SCENARIOS = SAMPLES / "cloudevents" / "samples" / "scenarios"
DOCUMENT_SCHEMA = SAMPLES / "schemas" / "cloudevents-document-schema.json"


class RecordingIngestor:
    """Keeps every ingested event (a fake of the pipeline for unit tests)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def ingest(self, events: Sequence[Event]) -> IngestResult:
        self.events.extend(dict(e) for e in events)
        return IngestResult(accepted=len(events), duplicates=0)

    def types_for(self, subject: str) -> list[str]:
        return [e["type"] for e in self.events if e.get("subject") == subject]


@pytest.fixture
def ingestor() -> RecordingIngestor:
    return RecordingIngestor()


def make_client(component: RegistryComponent) -> TestClient:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await component.start()
        try:
            yield
        finally:
            await component.stop()

    return TestClient(Starlette(routes=list(component.routes()), lifespan=lifespan))


@pytest.fixture
def component(tmp_path: Path, ingestor: RecordingIngestor) -> RegistryComponent:
    schema = DOCUMENT_SCHEMA if DOCUMENT_SCHEMA.exists() else None
    return RegistryComponent(tmp_path / "cebroker.db", BASE, ingestor=ingestor, document_schema=schema)


@pytest.fixture
def client(component: RegistryComponent) -> Iterator[TestClient]:
    with make_client(component) as c:
        yield c
