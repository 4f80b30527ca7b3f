"""The ingress hook for registry validation (mode off | warn | enforce), and the ``Ingestor``
contract used by the registry and protocol ingress (``cebroker/contracts.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from support.events import event
from support.servers import ServerThread

from cebroker.api.ops import OpsComponent
from cebroker.api.subscriptions import SubscriptionsComponent
from cebroker.app import Component, StorageComponent, admission_rules, create_app
from cebroker.contracts import Event, Ingestor, Violation
from cebroker.errors import ValidationError
from cebroker.pipeline.component import PipelineComponent
from cebroker.settings import Settings
from cebroker.storage import create_storage


class AmountValidator:
    """Requires ``data.amount`` to be a number."""

    def validate(self, ev: Event) -> list[Violation]:
        data = ev.get("data")
        if isinstance(data, dict) and isinstance(data.get("amount"), int | float):
            return []
        return [Violation("/data/amount", "must be a number")]


def _app(tmp_path: Path, mode: str) -> tuple[Any, PipelineComponent]:
    settings = Settings(db=tmp_path / "b.db", event_validation=mode, webhook_validation=False)
    storage = create_storage(settings.db)
    store = storage.subscriptions
    pipeline = PipelineComponent(
        settings, store, storage.deliveries, storage.circuits, validator=AmountValidator()
    )
    parts: list[Component] = [
        StorageComponent(storage),
        SubscriptionsComponent(store, settings, admission_rules()),
        pipeline,
        OpsComponent(storage.health),
    ]
    return create_app(settings, parts), pipeline


def test_enforce_refuses_with_a_pointer_per_violation(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, "enforce")
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as client:
        batch = [event(1, data={"amount": 3}), event(2, data={}), event(3, data={"amount": "x"})]
        r = client.post("/events", json=batch, headers={"content-type": "application/cloudevents-batch+json"})
        assert r.status_code == 400
        assert [e["pointer"] for e in r.json()["errors"]] == ["/1/data/amount", "/2/data/amount"]
        r = client.post(
            "/events",
            json=event(4, data={"amount": 1}),
            headers={"content-type": "application/cloudevents+json"},
        )
        assert r.status_code == 202


def test_warn_accepts_and_counts(tmp_path: Path) -> None:
    app, _ = _app(tmp_path, "warn")
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as client:
        r = client.post(
            "/events", json=event(1, data={}), headers={"content-type": "application/cloudevents+json"}
        )
        assert r.status_code == 202
        assert "cebroker_event_validation_warnings_total 1.0" in client.get("/metrics").text


async def test_ingest_contract_for_other_parts(tmp_path: Path) -> None:
    """``Ingestor.ingest``: all-or-nothing validation with ``/<index>/<attribute>`` pointers."""
    storage = create_storage(tmp_path / "b.db")
    await storage.open()
    component = PipelineComponent(
        Settings(db=tmp_path / "b.db"), storage.subscriptions, storage.deliveries, storage.circuits
    )
    assert isinstance(component.ingestor, Ingestor)
    await component.start()
    try:
        result = await component.ingestor.ingest([event(1), event(1), event(2)])
        assert (result.accepted, result.duplicates) == (3, 1)
        with pytest.raises(ValidationError) as info:
            await component.ingestor.ingest([event(3), {**event(4), "id": ""}])
        assert [p.pointer for p in info.value.problems] == ["/1/id"]
    finally:
        await component.stop()
        await storage.close()
