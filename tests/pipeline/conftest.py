"""Fixtures: a recording HTTP sink and a running broker, both real servers on free ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cebroker.app import create_app
from cebroker.settings import Settings
from pipeline.helpers import Broker
from pipeline.servers import ServerThread, Sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    recorder = Sink()
    with ServerThread(recorder) as server:
        recorder.url = server.url
        yield recorder


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
