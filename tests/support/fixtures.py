"""Fixtures of the support helpers for the whole suite (registered by ``tests/conftest.py``):
a recording sink, an in-memory sender, brokers served in threads, ``cebroker serve`` processes,
and PostgreSQL databases the broker's schema is already in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from servers.postgres import PostgresServer

from cebroker.storage.postgres import PostgresStorage
from support.broker import Broker, BrokerProcesses, Brokers
from support.lanes import require_marker
from support.memory import MemorySender
from support.sinks import Sink, served_sink


@pytest.fixture
def sink() -> Iterator[Sink]:
    """A recording HTTP sink on a free port (``sink.url``)."""
    with served_sink() as recorder:
        yield recorder


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """``make_broker(clock=..., storage=..., **settings)``: start a whole broker served in a
    thread, over its own SQLite file in ``tmp_path`` (see :meth:`Brokers.start`); all are
    stopped after the test."""
    started = Brokers(tmp_path)
    yield started.start
    started.close()


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker with default settings (no webhook handshake)."""
    return make_broker()


@pytest.fixture
def memory() -> MemorySender:
    """An in-memory sender: what a broker given ``memory.senders`` delivers to its HTTP
    subscriptions (sinks ``f"{memory.url}/path"``), kept per path (see :mod:`support.memory`)."""
    return MemorySender()


@pytest.fixture
def memory_broker(make_broker: Callable[..., Broker], memory: MemorySender) -> Broker:
    """A broker with default settings that delivers into ``memory`` instead of over HTTP."""
    return make_broker(senders=memory.senders)


@pytest.fixture
def broker_processes(tmp_path: Path) -> Iterator[BrokerProcesses]:
    """``broker_processes(db, log, *flags)``: ``cebroker serve`` children, ended after the test."""
    children = BrokerProcesses(tmp_path)
    yield children
    children.close()


@pytest.fixture(scope="session")
def postgres_template(postgres: PostgresServer) -> str:
    """A template database on the shared PostgreSQL with the broker's whole schema, made once per
    session (per worker, with pytest-xdist) by the broker's own ``prepare`` (the entry point
    every instance runs at start), whatever the migrations are and however they are written."""
    return postgres.create_template(lambda url: PostgresStorage(url).prepare())


@pytest.fixture
def migrated_postgres_url(
    request: pytest.FixtureRequest, postgres: PostgresServer, postgres_template: str
) -> str:
    """The URL of a new database on the shared PostgreSQL, for this test alone, with the broker's
    schema already in it: a copy of :func:`postgres_template`, so a test that only needs a
    working database does not create the schema again. ``postgres_url`` gives an empty one, for
    the tests of migrations and of instances racing to prepare a fresh database."""
    require_marker(request, "postgres")
    return postgres.create_database(template=postgres_template)
