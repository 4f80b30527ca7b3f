"""Helpers of the registry tests: sample paths, a recording ingestor, an in-process client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from ceprotocols.tracecontext import TraceContext
from starlette.applications import Starlette
from starlette.testclient import TestClient
from support.shared import XREGISTRY_SAMPLES

from cebroker.contracts import Event, IngestResult
from cebroker.registry.component import RegistryComponent
from cebroker.storage import Storage, create_storage

BASE = "http://testserver"
#: The spec's samples; tests reading them are marked ``@XREGISTRY_SAMPLES.needed``.
SAMPLES = XREGISTRY_SAMPLES.path
SCENARIOS = SAMPLES / "cloudevents" / "samples" / "scenarios"
DOCUMENT_SCHEMA = SAMPLES / "schemas" / "cloudevents-document-schema.json"


class RecordingIngestor:
    """Keeps every ingested event (a fake of the pipeline for unit tests)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def ingest(
        self, events: Sequence[Event], traces: Sequence[TraceContext | None] = ()
    ) -> IngestResult:
        self.events.extend(dict(e) for e in events)
        return IngestResult(accepted=len(events), duplicates=0)

    def types_for(self, subject: str) -> list[str]:
        return [e["type"] for e in self.events if e.get("subject") == subject]


def new_registry(db: Path, base: str = BASE, **options: Any) -> tuple[RegistryComponent, Storage]:
    """A registry component over a new (unopened) storage in ``db``, and that storage."""
    storage = create_storage(db)
    return RegistryComponent(storage.registry, base, **options), storage


def make_client(component: RegistryComponent, storage: Storage) -> TestClient:
    """A test client of an app serving only ``component`` over ``storage`` (both opened and
    started with the client, stopped and closed after it)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await storage.open()
        try:
            await component.start()
            try:
                yield
            finally:
                await component.stop()
        finally:
            await storage.close()

    return TestClient(Starlette(routes=list(component.routes()), lifespan=lifespan))
