"""Fixtures: a recording HTTP sink and a running broker, both real servers on free ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cebroker.app import create_app
from cebroker.settings import Settings
from pipeline.servers import ServerThread, Sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    recorder = Sink()
    with ServerThread(recorder) as server:
        recorder.url = server.url  # type: ignore[attr-defined]
        yield recorder


class Broker:
    """A running broker with an HTTP client bound to it."""

    def __init__(self, server: ServerThread, client: httpx.Client, app: Any) -> None:
        self.server = server
        self.url = server.url
        self.http = client
        self.app = app

    def subscribe(self, sink: str, **fields: Any) -> dict[str, Any]:
        body = {"protocol": "HTTP", "sink": sink, **fields}
        response = self.http.post("/subscriptions", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def send(self, event: dict[str, Any]) -> httpx.Response:
        return self.http.post("/events", json=event, headers={"content-type": "application/cloudevents+json"})


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    stack: list[tuple[ServerThread, httpx.Client]] = []

    def make(**overrides: Any) -> Broker:
        defaults: dict[str, Any] = {"db": tmp_path / "broker.db", "webhook_validation": False}
        settings = Settings(**{**defaults, **overrides})
        app = create_app(settings)
        server = ServerThread(app).__enter__()
        client = httpx.Client(base_url=server.url, timeout=30)
        stack.append((server, client))
        return Broker(server, client, app)

    yield make
    for server, client in reversed(stack):
        client.close()
        server.__exit__(None, None, None)


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker()


def event(n: int = 1, **extra: Any) -> dict[str, Any]:
    """A valid structured event."""
    return {
        "specversion": "1.0",
        "id": f"e-{n}",
        "source": "/tests",
        "type": "com.example.test",
        "datacontenttype": "application/json",
        "data": {"n": n},
        **extra,
    }
