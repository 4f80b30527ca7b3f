"""Fixtures for the Spark tests: one local SparkSession, a real broker and a recording sink."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from support.broker import Brokers
from support.servers import ServerThread
from support.sinks import Sink
from support.waiting import wait_for, wait_until

from spark.proxy import RefusingProxy

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
#: Where the broker's one subscription delivers on the sink.
SINK_PATH = "/sink"


@dataclass
class LiveBroker:
    """A running broker whose one HTTP subscription delivers everything to ``sink`` (structured
    mode, on :data:`SINK_PATH`), in the order the broker accepted it (``concurrency`` 1)."""

    url: str
    sink: Sink

    @property
    def events_url(self) -> str:
        """The batch ingress endpoint."""
        return f"{self.url}/events"

    def received(self) -> list[dict[str, Any]]:
        """The events delivered so far, markers left out."""
        return [e for e in self.sink.events(SINK_PATH) if e.get("source") != MARKER_SOURCE]

    def delivered(self, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Every event delivered once ``count`` have arrived, markers left out.

        A marker event sent to the broker afterwards is delivered after everything the broker
        accepted before it, so once the marker has arrived no earlier event, and no duplicate
        of one, is still on its way.
        """
        wait_for(self.received, lambda got: len(got) >= count, timeout, f"{count} events delivered")
        marker = {"specversion": "1.0", "id": uuid.uuid4().hex, "source": MARKER_SOURCE, "type": "marker"}
        response = httpx.post(
            self.events_url,
            json=marker,
            headers={"content-type": "application/cloudevents+json"},
            timeout=10,
        )
        assert response.status_code == 202, response.text
        wait_until(
            lambda: any(e["id"] == marker["id"] for e in self.sink.events(SINK_PATH)),
            timeout,
            "the marker sent after them",
        )
        return self.received()


@pytest.fixture
def make_broker(tmp_path: Path) -> Iterator[Callable[..., LiveBroker]]:
    """Starts real brokers (``Settings`` overrides as keywords, SQLite files in ``tmp_path``),
    each subscribed by a real HTTP sink that receives structured-mode deliveries. Stopping lets
    in-flight requests finish."""
    brokers = Brokers(tmp_path, force_exit=False)
    sinks: list[ServerThread] = []

    def make(**overrides: Any) -> LiveBroker:
        sink = Sink()
        server = ServerThread(sink, force_exit=False).start()
        sinks.append(server)
        sink.url = server.url
        broker = brokers.start(**overrides)
        broker.subscribe(
            f"{sink.url}{SINK_PATH}",
            protocolsettings={"contentmode": "structured"},
            config={"concurrency": "1"},
        )
        return LiveBroker(broker.url, sink)

    try:
        yield make
    finally:
        brokers.close()
        for server in reversed(sinks):
            server.stop()


@pytest.fixture
def broker(make_broker: Callable[..., LiveBroker]) -> LiveBroker:
    """A broker with default settings and its recording sink."""
    return make_broker()


@pytest.fixture
def proxy(broker: LiveBroker) -> Iterator[tuple[RefusingProxy, str]]:
    """A proxy in front of the broker that can refuse with 503 for a while; yields it and the
    events URL to write to."""
    refusing = RefusingProxy(broker.url)
    with ServerThread(refusing, force_exit=False) as server:
        yield refusing, f"{server.url}/events"
