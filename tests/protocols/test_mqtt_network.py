"""The MQTT sender's network IO runs on the asyncio event loop (``ceprotocols.mqtt.network``).

Checked against real mosquitto servers: no paho network thread is started, a lost connection is
re-established by the same client (publishes wait for it, MQTT 3.1.1/5.0 section 4.4 resend
in-flight messages), and closing is prompt even while the broker is unreachable.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from ceprotocols.errors import DeliveryTimeout, TargetUnreachable
from ceprotocols.mqtt.binding import MqttMessage
from ceprotocols.mqtt.connection import MqttConnection
from ceprotocols.mqtt.sender import MqttSender
from ceprotocols.sender import Destination
from servers import MosquittoServer
from servers.base import CLOSED_PORT

from protocols.ce_samples import as_strings, make_event
from protocols.consumers import MqttConsumer
from protocols.harness import unique_name

pytestmark = pytest.mark.mqtt


def paho_threads() -> list[str]:
    """Network threads of paho clients with the client ids the broker gives its connections."""
    return [t.name for t in threading.enumerate() if t.name.startswith("paho-mqtt-client-cebroker-")]


async def test_sender_uses_no_network_thread(mosquitto: MosquittoServer) -> None:
    """Deliveries are written and confirmed by the event loop: paho starts no thread of its own."""
    before = paho_threads()
    sender = MqttSender(v5=True)
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=True).ready()
    try:
        events = [make_event() for _ in range(20)]
        destination = Destination(
            protocol="MQTT5", sink=mosquitto.url, settings={"topicname": name, "qos": 2}
        )
        await asyncio.gather(*(sender.deliver(e, destination) for e in events))
        assert paho_threads() == before
        received = await consumer.receive(20)
        assert sorted(r.event["id"] for r in received) == sorted(e["id"] for e in events)
    finally:
        await sender.aclose()
        await consumer.close()


async def test_same_connection_comes_back_after_a_broker_restart(tmp_path: Path) -> None:
    """After the broker restarts on the same port the sender's client reconnects by itself and
    the next delivery goes through on it (no second connection)."""
    server = MosquittoServer(tmp_path / "mosquitto")
    server.start()
    sender = MqttSender(v5=False)
    name = unique_name()
    destination = Destination(protocol="MQTT3", sink=server.url, settings={"topicname": name}, timeout=15)
    try:
        await sender.deliver(make_event(), destination)
        await asyncio.to_thread(server.restart)
        consumer = await MqttConsumer(server.host, server.port, name, v5=False).ready()
        try:
            event = make_event()
            await sender.deliver(event, destination)
            [received] = await consumer.receive(1)
            assert received.event == event
            assert sender.connections == 1
        finally:
            await consumer.close()
    finally:
        await sender.aclose()
        server.stop()


@pytest.mark.alone  # bounds of 5 s and 1 s on the wall clock
async def test_unreachable_broker_fails_in_time_and_closes_promptly() -> None:
    """Nothing listening: the delivery fails as TargetUnreachable within its timeout (the client
    keeps retrying in the background), and closing the sender stops the retries at once."""
    sender = MqttSender(v5=True)
    destination = Destination(
        protocol="MQTT5", sink=f"mqtt://127.0.0.1:{CLOSED_PORT}", settings={"topicname": "t"}, timeout=1.5
    )
    started = time.monotonic()
    with pytest.raises(TargetUnreachable):
        await sender.deliver(make_event(), destination)
    assert time.monotonic() - started < 5
    started = time.monotonic()
    await sender.aclose()
    assert time.monotonic() - started < 1
    assert sender.connections == 0


async def test_binary_mode_over_the_loop_driven_client(mosquitto: MosquittoServer) -> None:
    """Many concurrent binary-mode deliveries (more than mosquitto's receive maximum of 20 in
    flight, so paho queues some) all complete and arrive intact."""
    sender = MqttSender(v5=True)
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=True).ready()
    try:
        events = [make_event("text") for _ in range(200)]
        destination = Destination(
            protocol="MQTT5", sink=mosquitto.url, settings={"topicname": name, "qos": 1}
        )
        await asyncio.gather(*(sender.deliver(e, destination) for e in events))
        received = await consumer.receive(200)
        by_id = {r.event["id"]: r.event for r in received}
        assert by_id == {e["id"]: as_strings(e) for e in events}
    finally:
        await sender.aclose()
        await consumer.close()


async def test_an_unacknowledged_publish_times_out_and_its_packet_id_is_abandoned() -> None:
    """A broker that accepts the connection but never sends PUBACK: the delivery fails as a
    DeliveryTimeout after its time, and a late PUBACK for that packet id would not be taken for
    the confirmation of a later publish (the id is remembered as abandoned)."""
    publishes: list[bytes] = []

    async def silent_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # CONNECT
        writer.write(bytes([0x20, 3, 0, 0, 0]))  # CONNACK: no session, success, no properties
        while chunk := await reader.read(65536):
            publishes.append(chunk)
        writer.close()

    server = await asyncio.start_server(silent_broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = await MqttConnection("127.0.0.1", port, v5=True).open(5.0)
    try:
        started = time.monotonic()
        with pytest.raises(DeliveryTimeout, match="no MQTT acknowledgement"):
            await connection.publish("t", MqttMessage(b"x"), qos=1, within=0.3)
        assert 0.25 < time.monotonic() - started < 5.0
        assert publishes  # it was written
        assert not connection._pending
        assert len(connection._abandoned) == 1
    finally:
        await connection.close()
        server.close()
