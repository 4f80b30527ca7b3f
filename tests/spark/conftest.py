"""Fixtures for the Spark tests: one local SparkSession, a real broker and a recording sink."""

from __future__ import annotations

import uuid
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


#: Source of the marker events :meth:`LiveBroker.delivered` sends.
MARKER_SOURCE = "/tests/marker"


@dataclass
class LiveBroker:
    """A running broker whose one HTTP subscription delivers everything to ``sink``, in the
    order the broker accepted it (``concurrency`` 1)."""

    url: str
    sink: RecordingSink

    @property
    def events_url(self) -> str:
        """The batch ingress endpoint."""
        return f"{self.url}/events"

    def delivered(self, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every event delivered once ``count`` have arrived (or ``timeout`` has passed), markers
        left out.

        A marker event sent to the broker afterwards is delivered after everything the broker
        accepted before it, so once the marker has arrived no earlier event, and no duplicate
        of one, is still on its way.
        """
        self.sink.wait_for(lambda got: len(_without_markers(got)) >= count, timeout)
        marker = {"specversion": "1.0", "id": uuid.uuid4().hex, "source": MARKER_SOURCE, "type": "marker"}
        response = httpx.post(
            self.events_url,
            json=marker,
            headers={"content-type": "application/cloudevents+json"},
            timeout=10,
        )
        assert response.status_code == 202, response.text
        assert self.sink.wait_for(lambda got: any(e["id"] == marker["id"] for e in got), timeout)
        return _without_markers(self.sink.snapshot())


def _without_markers(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("source") != MARKER_SOURCE]


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
                "config": {"concurrency": "1"},
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
