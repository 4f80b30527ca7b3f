"""Fixtures for the protocol tests: the server of each protocol case, started on demand."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import CASES, ProtocolCase

MARKS = {"MQTT3": "mqtt", "MQTT5": "mqtt", "AMQP": "amqp", "KAFKA": "kafka", "NATS": "nats"}


def protocol_params(*, modes: bool = False, http: bool = False) -> list[Any]:
    """pytest params over every protocol case (and content mode), marked with the server they
    need. HTTP only when asked for: it pools connections and has no required setting, so it takes
    part in the delivery and unreachable-target contracts; its own tests cover the rest."""
    params = []
    for name, case in CASES.items():
        if name == "HTTP" and not http:
            continue
        marks = [getattr(pytest.mark, MARKS[name])] if name in MARKS else []
        if modes:
            params += [pytest.param(case, mode, id=f"{name}-{mode}", marks=marks) for mode in case.modes]
        else:
            params.append(pytest.param(case, id=name, marks=marks))
    return params


@pytest.fixture
def server_of(request: pytest.FixtureRequest) -> Any:
    """``server_of(case)``: the shared server for a protocol case (started on first use)."""

    def get(case: ProtocolCase) -> Any:
        return request.getfixturevalue(case.fixture)

    return get


class HttpSinkServer:
    """A recording HTTP sink served by uvicorn on a free port."""

    def __init__(self, sink: Any, url: str) -> None:
        self.sink = sink
        self.url = url


@pytest.fixture(scope="session")
def http_sink() -> Iterator[HttpSinkServer]:
    """A shared recording HTTP sink (grants the webhook handshake)."""
    from pipeline.servers import ServerThread, Sink

    sink = Sink()
    with ServerThread(sink) as server:
        yield HttpSinkServer(sink, server.url)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start a broker (the real app under uvicorn on a free port) with Settings overrides;
    returns its base URL. Stopped at the end of the test."""
    from pipeline.servers import ServerThread

    from cebroker.app import create_app
    from cebroker.settings import Settings

    running: list[Any] = []

    def start(**overrides: Any) -> str:
        settings = Settings(db=tmp_path / f"broker{len(running)}.db", webhook_validation=False, **overrides)
        server = ServerThread(create_app(settings)).__enter__()
        running.append(server)
        return str(server.url)

    yield start
    for server in reversed(running):
        server.__exit__(None, None, None)
