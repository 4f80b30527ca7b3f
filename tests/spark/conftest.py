"""Fixtures for the Spark tests: one local SparkSession, a real broker and a recording sink."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from cebroker.app import create_app
from cebroker.settings import Settings
from spark.live import RecordingSink, RefusingProxy, ServerThread

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A ``local[2]`` session with the ``cloudevents`` data source registered (started once)."""
    from cebroker.spark.feed import build_session

    session = build_session("local[2]", app_name="cebroker-tests")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()


@dataclass
class LiveBroker:
    """A running broker whose one HTTP subscription delivers everything to ``sink``."""

    url: str
    sink: RecordingSink

    @property
    def events_url(self) -> str:
        """The batch ingress endpoint."""
        return f"{self.url}/events"


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., LiveBroker]]:
    """Starts real brokers (``Settings`` overrides as keywords, SQLite files in ``tmp_path``),
    each subscribed by a real HTTP sink that receives structured-mode deliveries."""
    servers: list[ServerThread] = []

    def make(**overrides: Any) -> LiveBroker:
        settings = Settings(db=tmp_path / f"broker{len(servers)}.db", webhook_validation=False, **overrides)
        sink = RecordingSink()
        sink_server = ServerThread(sink)
        servers.append(sink_server)
        broker_server = ServerThread(create_app(settings))
        servers.append(broker_server)
        created = httpx.post(
            f"{broker_server.url}/subscriptions",
            json={
                "protocol": "HTTP",
                "sink": f"{sink_server.url}/sink",
                "protocolsettings": {"contentmode": "structured"},
            },
            timeout=10,
        )
        assert created.status_code == 201, created.text
        return LiveBroker(broker_server.url, sink)

    try:
        yield make
    finally:
        for server in reversed(servers):
            server.close()


@pytest.fixture
def broker(make_broker: Callable[..., LiveBroker]) -> LiveBroker:
    """A broker with default settings and its recording sink."""
    return make_broker()


@pytest.fixture
def proxy(broker: LiveBroker) -> Iterator[tuple[RefusingProxy, str]]:
    """A proxy in front of the broker that can refuse with 503 for a while; yields it and the
    events URL to write to."""
    refusing = RefusingProxy(broker.url)
    server = ServerThread(refusing)
    try:
        yield refusing, f"{server.url}/events"
    finally:
        server.close()
