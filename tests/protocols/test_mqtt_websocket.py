"""MQTT over WebSocket sinks (``ws://``): MQTT 5.0 section 6 and MQTT 3.1.1 section 6.

The sender connects through :class:`servers.mosquitto_websocket.WebSocketRelay`, a loopback
WebSocket endpoint that carries the MQTT bytes to the test mosquitto (see its module for why
mosquitto's own WebSocket listener is not used). The relay records the upgrade requests and
counts the frames, so each test shows the delivery really travelled over WebSocket.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from ceprotocols.errors import TargetUnreachable
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from servers import MosquittoServer
from servers.mosquitto_websocket import WebSocketRelay

from protocols.ce_samples import as_strings, make_event
from protocols.consumers import MqttConsumer
from protocols.harness import unique_name

pytestmark = pytest.mark.mqtt


@pytest.fixture
def relay(mosquitto: MosquittoServer) -> Iterator[WebSocketRelay]:
    """A WebSocket endpoint at ``/mqtt`` in front of the shared mosquitto."""
    relay = WebSocketRelay(mosquitto.port)
    relay.start()
    yield relay
    relay.stop()


@pytest.mark.parametrize(
    ("protocol", "mode"), [("MQTT3", "structured"), ("MQTT5", "binary"), ("MQTT5", "structured")]
)
async def test_delivers_over_websocket(
    protocol: str, mode: str, mosquitto: MosquittoServer, relay: WebSocketRelay
) -> None:
    """Events sent to a ``ws://`` sink arrive intact at a TCP subscriber of the same broker, over
    one WebSocket connection that asked for the ``mqtt`` subprotocol on the default path."""
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=protocol == "MQTT5").ready()
    sender = create_sender(protocol)
    sink = f"ws://{relay.host}:{relay.port}"  # no path: the sender's default is /mqtt
    try:
        events = [make_event("json-object"), make_event("binary")]
        for event in events:
            settings = {"topicname": name, "qos": 1, "contentmode": mode}
            await sender.deliver(event, Destination(protocol=protocol, sink=sink, settings=settings))
        received = await consumer.receive(2)
        expected = events if mode == "structured" else [as_strings(e) for e in events]
        assert [r.event for r in received] == expected
        assert relay.handshakes == [("/mqtt", "mqtt")]
        assert relay.frames >= 3  # CONNECT and the two PUBLISH packets
    finally:
        await sender.aclose()
        await consumer.close()


async def test_concurrent_deliveries_over_websocket(
    mosquitto: MosquittoServer, relay: WebSocketRelay
) -> None:
    """Many deliveries in flight on one WebSocket connection all complete: acknowledgements that
    arrive together in one read are all handled (none waits for more bytes on the socket)."""
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=True).ready()
    sender = create_sender("MQTT5")
    try:
        events = [make_event("text") for _ in range(150)]
        destination = Destination(protocol="MQTT5", sink=relay.url, settings={"topicname": name, "qos": 1})
        await asyncio.wait_for(asyncio.gather(*(sender.deliver(e, destination) for e in events)), 20)
        received = await consumer.receive(150)
        assert sorted(r.event["id"] for r in received) == sorted(e["id"] for e in events)
        assert len(relay.handshakes) == 1
    finally:
        await sender.aclose()
        await consumer.close()


async def test_sink_path_is_used(mosquitto: MosquittoServer) -> None:
    """A path in the sink is the WebSocket request path; the wrong one fails as unreachable
    (the endpoint refuses the upgrade) rather than hanging."""
    relay = WebSocketRelay(mosquitto.port, path="/brokers/mqtt")
    relay.start()
    sender = create_sender("MQTT5")
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=True).ready()
    try:
        settings = {"topicname": name, "qos": 1}
        wrong = Destination(
            protocol="MQTT5", sink=f"ws://{relay.host}:{relay.port}", settings=settings, timeout=2
        )
        with pytest.raises(TargetUnreachable):
            await sender.deliver(make_event(), wrong)
        event = make_event()
        await sender.deliver(event, Destination(protocol="MQTT5", sink=relay.url, settings=settings))
        [received] = await consumer.receive(1)
        assert received.event == as_strings(event)
        assert relay.handshakes[-1] == ("/brokers/mqtt", "mqtt")
    finally:
        await sender.aclose()
        await consumer.close()
        relay.stop()
