"""MQTT over WebSocket sinks in the Subscriptions API: ``ws``/``wss`` for MQTT3 and MQTT5.

The issue lists the MQTT sink schemes ``mqtt``, ``mqtts``, ``ws`` and ``wss`` (Subscriptions API
3.2.1 ``sink``; MQTT 5.0 and 3.1.1 section 6, MQTT over WebSocket). Delivery over ``ws://`` is
tested against a real mosquitto in ``tests/protocols/test_mqtt_websocket.py``.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from api.bodies import VALID, create
from cebroker.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The private address below is a sink only where the operator allows its network."""
    return Settings(db=tmp_path / "api.db", allow_sink_networks=("10.0.0.0/8",))


@pytest.mark.parametrize("protocol", ["MQTT3", "MQTT5"])
@pytest.mark.parametrize(
    "sink", ["ws://broker.example:8080/mqtt", "wss://broker.example/ws", "ws://10.0.0.7"]
)
async def test_websocket_sinks_are_accepted(client: httpx.AsyncClient, protocol: str, sink: str) -> None:
    """201, and the realized subscription keeps the sink as given."""
    created = await create(client, {**VALID[protocol], "sink": sink})
    assert created["sink"] == sink
    assert created["protocol"] == protocol
    fetched = await client.get(f"/subscriptions/{created['id']}")
    assert fetched.json()["sink"] == sink


@pytest.mark.parametrize("sink", ["ws://broker.example/mqtt", "wss://broker.example/mqtt"])
async def test_websocket_schemes_stay_mqtt_only(client: httpx.AsyncClient, sink: str) -> None:
    """Other protocols still refuse a WebSocket sink, naming their own schemes."""
    r = await client.post("/subscriptions", json={**VALID["AMQP"], "sink": sink})
    assert r.status_code == 400
    [error] = r.json()["errors"]
    assert error["pointer"] == "/sink"
    assert "amqp, amqps" in error["detail"]
