"""MQTT over TLS (``mqtts://``) and MQTT over secure WebSocket (``wss://``) sinks.

A private mosquitto gets a TLS listener with a self-signed certificate for 127.0.0.1, trusted
through ``SSL_CERT_FILE`` (read by OpenSSL's default verify paths, which the sender uses); a
``wss://`` endpoint is the WebSocket relay with the same certificate in front of mosquitto's TCP
listener. Many deliveries in flight check that the event-loop-driven client also reads what the
TLS layer has already decrypted (``pending()``), not only what the socket signals.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

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
def tls_mosquitto(tmp_path: Path) -> Iterator[MosquittoServer]:
    """A private mosquitto with a plain and a TLS listener."""
    server = MosquittoServer(tmp_path / "mosquitto", tls=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def trusted(tls_mosquitto: MosquittoServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's certificate, trusted by TLS clients created from now on."""
    assert tls_mosquitto.certificate is not None
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_mosquitto.certificate))
    return tls_mosquitto.certificate


async def deliver_many(protocol: str, sink: str, server: MosquittoServer, count: int) -> None:
    """Deliver ``count`` events concurrently and check a plain-TCP subscriber got them intact."""
    name = unique_name()
    consumer = await MqttConsumer(server.host, server.port, name, v5=protocol == "MQTT5").ready()
    sender = create_sender(protocol)
    try:
        events = [make_event("text") for _ in range(count)]
        destination = Destination(protocol=protocol, sink=sink, settings={"topicname": name, "qos": 1})
        await asyncio.wait_for(asyncio.gather(*(sender.deliver(e, destination) for e in events)), 20)
        received = {r.event["id"]: r.event for r in await consumer.receive(count)}
        expected = events if protocol == "MQTT3" else [as_strings(e) for e in events]
        assert received == {e["id"]: e for e in expected}
    finally:
        await sender.aclose()
        await consumer.close()


@pytest.mark.usefixtures("trusted")
@pytest.mark.parametrize("protocol", ["MQTT3", "MQTT5"])
async def test_delivers_over_tls(protocol: str, tls_mosquitto: MosquittoServer) -> None:
    """``mqtts://`` connects with TLS, verifying the broker's certificate, and delivers."""
    sink = f"mqtts://{tls_mosquitto.host}:{tls_mosquitto.tls_port}"
    await deliver_many(protocol, sink, tls_mosquitto, 100)


async def test_untrusted_certificate_is_unreachable(tls_mosquitto: MosquittoServer) -> None:
    """Without trust in the self-signed certificate the TLS handshake fails, and the delivery is
    TargetUnreachable (retryable) when its timeout ends."""
    sender = create_sender("MQTT5")
    sink = f"mqtts://{tls_mosquitto.host}:{tls_mosquitto.tls_port}"
    try:
        with pytest.raises(TargetUnreachable):
            await sender.deliver(
                make_event(),
                Destination(protocol="MQTT5", sink=sink, settings={"topicname": "t"}, timeout=1.5),
            )
    finally:
        await sender.aclose()


@pytest.mark.parametrize("protocol", ["MQTT3", "MQTT5"])
async def test_delivers_over_secure_websocket(
    protocol: str, tls_mosquitto: MosquittoServer, trusted: Path
) -> None:
    """``wss://`` is a WebSocket connection inside TLS, with the same certificate check."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(trusted, trusted.with_name("key.pem"))
    relay = WebSocketRelay(tls_mosquitto.port, tls=context)
    relay.start()
    try:
        assert relay.url.startswith("wss://")
        await deliver_many(protocol, relay.url, tls_mosquitto, 100)
        assert relay.handshakes == [("/mqtt", "mqtt")]
    finally:
        relay.stop()
