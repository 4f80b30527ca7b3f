"""pytest fixtures that start real servers (registered for the whole suite in tests/conftest.py).

``mosquitto``, ``nats_server``, ``rabbitmq``, ``tansu`` and ``postgres`` are session-scoped and
shared: tests must use their own topic/subject/queue names (``postgres_url`` gives each test its
own empty database; ``migrated_postgres_url``, in :mod:`support.fixtures`, one with the broker's
schema) and must not stop them. Tests that stop or restart a server (resilience) ask
``server_factory`` for a private one, torn down afterwards. With pytest-xdist each worker is a
session of its own, with its own servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support.lanes import require_marker

from servers.base import ServerError, ServerProcess
from servers.mosquitto import MosquittoServer
from servers.nats import NatsServer
from servers.postgres import PostgresServer
from servers.rabbitmq import RabbitMQServer
from servers.tansu import TansuServer

S = TypeVar("S", bound=ServerProcess)


def _started(server: S) -> Iterator[S]:
    try:
        server.start()
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        if isinstance(server, RabbitMQServer | PostgresServer):
            server.close()
        else:
            server.stop()


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoServer]:
    """A shared mosquitto (MQTT 3.1.1 and 5), anonymous access."""
    yield from _started(MosquittoServer(tmp_path_factory.mktemp("mosquitto")))


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A shared nats-server with JetStream, no authentication."""
    yield from _started(NatsServer(tmp_path_factory.mktemp("nats")))


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQServer]:
    """A shared RabbitMQ with AMQP 1.0 (about five seconds to start, once per session)."""
    yield from _started(RabbitMQServer(tmp_path_factory.mktemp("rabbitmq")))


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuServer]:
    """A shared tansu (Kafka protocol), in-memory storage."""
    yield from _started(TansuServer(tmp_path_factory.mktemp("tansu")))


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """A shared PostgreSQL cluster (about two seconds to create and start, once per session)."""
    try:
        server = PostgresServer(tmp_path_factory.mktemp("postgres"))
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield from _started(server)


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest, postgres: PostgresServer) -> str:
    """The URL of a new, empty database on the shared PostgreSQL, for this test alone."""
    require_marker(request, "postgres")
    return postgres.create_database()


@pytest.fixture
def server_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start a private server: ``server_factory(NatsServer, token="t")``. Every server it started
    is stopped when the test ends, whatever state the test left it in. A private PostgreSQL is
    for tests marked ``postgres`` only (the lanes select on it)."""
    started: list[ServerProcess] = []

    def start(kind: type[S], **options: Any) -> S:
        if issubclass(kind, PostgresServer):
            require_marker(request, "postgres")
        server = kind(tmp_path / f"{kind.name}-{len(started)}", **options)
        started.append(server)
        try:
            server.start()
        except ServerError as exc:
            pytest.fail(str(exc), pytrace=False)
        return server

    yield start
    for server in reversed(started):
        if isinstance(server, RabbitMQServer | PostgresServer):
            server.close()
        else:
            server.stop()
