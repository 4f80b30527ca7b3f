"""Fixtures for the Spark tests: one local SparkSession, a real broker and a recording sink."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
def broker(tmp_path: Path) -> Iterator[LiveBroker]:
    """The real broker app (SQLite file in ``tmp_path``) subscribed by a real HTTP sink that
    receives structured-mode deliveries."""
    sink = RecordingSink()
    sink_server = ServerThread(sink)
    broker_server = ServerThread(create_app(Settings(db=tmp_path / "broker.db", webhook_validation=False)))
    try:
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
        yield LiveBroker(broker_server.url, sink)
    finally:
        broker_server.close()
        sink_server.close()


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
