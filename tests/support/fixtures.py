"""Fixtures of the support helpers for the whole suite (registered by ``tests/conftest.py``):
a recording sink, brokers served in threads, and ``cebroker serve`` processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.broker import Broker, BrokerProcesses, Brokers
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
def broker_processes(tmp_path: Path) -> Iterator[BrokerProcesses]:
    """``broker_processes(db, log, *flags)``: ``cebroker serve`` children, ended after the test."""
    children = BrokerProcesses(tmp_path)
    yield children
    children.close()
