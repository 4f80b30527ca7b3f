"""Every sender checks the address it connects to against the network policy, at connect time.

Refusals are asserted on real sockets: the sink is a listening socket on 127.0.0.1 that counts
the connections reaching it, and a refused destination must leave it at zero. The positive path
goes to the real servers (tests/servers/) through names the injected resolver maps to
127.0.0.1, with loopback allowed the way the broker allows it on an unauthenticated loopback
API, or through an allowed network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit, urlunsplit

import pytest
from ceprotocols.egress import NetworkPolicy, check_destination
from ceprotocols.errors import DeliveryError, DestinationRefused
from ceprotocols.http import HttpSender
from ceprotocols.kafka.sender import KafkaSender
from ceprotocols.mqtt.sender import MqttSender
from ceprotocols.nats.client import only_among
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination, Sender
from nats.aio.client import Server
from servers import MosquittoServer, TansuServer
from support.sinks import Sink, served_sink
from support.waiting import async_wait_until

from protocols.ce_samples import make_event
from protocols.harness import ProtocolCase, protocol_params, unique_name
from protocols.resolvers import CountingListener, MapResolver, RebindingResolver

STRICT = NetworkPolicy()
LOOPBACK_ALLOWED = NetworkPolicy(allow_loopback=True)
SCHEMES = {"HTTP": "http", "MQTT3": "mqtt", "MQTT5": "mqtt", "AMQP": "amqp", "KAFKA": "kafka", "NATS": "nats"}


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    counting = CountingListener()
    yield counting
    counting.close()


def sink_at(case: ProtocolCase, host: str, port: int) -> str:
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = "/hook" if case.protocol == "HTTP" else ""
    return f"{SCHEMES[case.protocol]}://{netloc}{path}"


def renamed(url: str, host: str) -> str:
    """``url`` with its host (127.0.0.1 in every test server's URL) replaced by ``host``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.replace("127.0.0.1", host)))


def destination(case: ProtocolCase, sink: str, name: str = "refused", timeout: float = 5.0) -> Destination:
    return Destination(
        protocol=case.protocol, sink=sink, settings=case.settings(name, case.modes[0]), timeout=timeout
    )


def connections(sender: Sender) -> int:
    """Connections the sender holds (HTTP pools inside its transport and has no such count)."""
    return int(getattr(sender, "connections", 0))


async def refused(sender: Sender, where: Destination) -> DestinationRefused:
    """Deliver and return the refusal; the sender is closed afterwards."""
    try:
        with pytest.raises(DestinationRefused) as caught:
            await sender.deliver(make_event(), where)
        assert connections(sender) == 0
    finally:
        await sender.aclose()
    assert not caught.value.retryable
    assert caught.value.status == "destination"
    return caught.value


@pytest.mark.parametrize("case", protocol_params(http=True))
async def test_refused_literal_address_is_never_connected(
    case: ProtocolCase, listener: CountingListener
) -> None:
    """Loopback sink, loopback not allowed: a final refusal and not one connection."""
    sender = create_sender(case.protocol, policy=STRICT, resolver=MapResolver({}))
    error = await refused(sender, destination(case, sink_at(case, "127.0.0.1", listener.port)))
    assert "127.0.0.1 is a loopback address" in str(error)
    assert listener.connections() == 0


@pytest.mark.parametrize("case", protocol_params(http=True))
async def test_name_resolving_to_a_refused_address_is_never_connected(
    case: ProtocolCase, listener: CountingListener
) -> None:
    resolver = MapResolver({"evil.test": ["127.0.0.1"]})
    sender = create_sender(case.protocol, policy=STRICT, resolver=resolver)
    error = await refused(sender, destination(case, sink_at(case, "evil.test", listener.port)))
    assert "evil.test resolves to 127.0.0.1, a loopback address" in str(error)
    assert "evil.test" in resolver.calls
    assert listener.connections() == 0


@pytest.mark.parametrize("case", protocol_params(http=True))
async def test_dns_rebinding_becomes_a_refusal_not_a_request(
    case: ProtocolCase, listener: CountingListener
) -> None:
    """Public when the subscription is checked, loopback when the sender connects."""
    resolver = RebindingResolver("rebind.test", "93.184.216.34", "127.0.0.1")
    sink = sink_at(case, "rebind.test", listener.port)
    assert await check_destination(sink, STRICT, resolver) is None
    sender = create_sender(case.protocol, policy=STRICT, resolver=resolver)
    error = await refused(sender, destination(case, sink))
    assert "rebind.test resolves to 127.0.0.1, a loopback address" in str(error)
    assert listener.connections() == 0


@pytest.mark.parametrize(
    "host",
    [
        "10.1.2.3",
        "169.254.169.254",
        "fe80::1",
        "fc00::7",
        "::ffff:127.0.0.1",
        "100.64.0.1",
        "224.0.0.1",
        "::",
    ],
)
@pytest.mark.parametrize("case", protocol_params(http=True))
async def test_every_address_class_is_refused_before_connecting(case: ProtocolCase, host: str) -> None:
    """Literal addresses of each class: refused at once (connecting to most of them would hang
    until the timeout, or fail as unreachable, instead)."""
    sender = create_sender(case.protocol, policy=STRICT, resolver=MapResolver({}))
    started = time.monotonic()
    await refused(sender, destination(case, sink_at(case, host, 4000), timeout=30.0))
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "policy", [LOOPBACK_ALLOWED, NetworkPolicy.from_cidrs(["127.0.0.0/8"])], ids=["loopback", "cidr"]
)
@pytest.mark.parametrize("case", protocol_params(http=True))
async def test_allowed_destinations_are_delivered_by_name(
    case: ProtocolCase, policy: NetworkPolicy, server_of: Callable[[ProtocolCase], Any]
) -> None:
    """The real server, reached through a name the resolver maps to 127.0.0.1: the sender
    connects to the checked address and the event arrives."""
    server = server_of(case)
    name = unique_name()
    consumer = await case.consumer(server, name)
    resolver = MapResolver({"sink.test": ["127.0.0.1"]})
    sender = create_sender(case.protocol, policy=policy, resolver=resolver)
    try:
        event = make_event()
        target = case.destination(server, name)
        await sender.deliver(event, destination(case, renamed(target.sink, "sink.test"), name, timeout=15.0))
        [received] = await consumer.receive(1)
        assert received.event["id"] == event["id"]
        assert "sink.test" in resolver.calls
    finally:
        await sender.aclose()
        await consumer.close()


# -- HTTP: the handshake and token endpoints go through the same check ---------------------------


async def test_webhook_handshake_to_a_refused_origin_is_never_sent(listener: CountingListener) -> None:
    sender = HttpSender(validate_webhooks=True, webhook_origin="broker.test", policy=STRICT)
    error = await refused(sender, Destination(protocol="HTTP", sink=f"http://127.0.0.1:{listener.port}/hook"))
    assert str(error).startswith("webhook validation: refused: host 127.0.0.1 is a loopback address")
    assert listener.connections() == 0


async def test_token_refresh_at_a_refused_endpoint_is_never_sent() -> None:
    """The sink is allowed, the credential's refresh endpoint resolves to a private address: no
    token request, so no delivery either."""
    resolver = MapResolver({"hook.test": ["127.0.0.1"], "idp.test": ["10.0.0.7"]})
    sender = HttpSender(
        validate_webhooks=False, policy=NetworkPolicy.from_cidrs(["127.0.0.1/32"]), resolver=resolver
    )
    recorder: Sink
    with served_sink() as recorder:
        port = urlsplit(recorder.url).port
        where = Destination(
            protocol="HTTP",
            sink=f"http://hook.test:{port}/hook",
            credential={
                "credentialtype": "REFRESHTOKEN",
                "refreshtoken": "r-1",
                "refreshtokenendpoint": "http://idp.test/token",
            },
        )
        error = await refused(sender, where)
        assert recorder.at("/hook") == []
    assert str(error) == "token refresh: refused: host idp.test resolves to 10.0.0.7, a private address"


# -- MQTT: every reconnect is checked ---------------------------------------------------------------


async def test_mqtt_reconnect_to_a_rebound_name_is_refused(tmp_path: Path) -> None:
    """Connected while the name pointed at an allowed address; the broker restarts and the name
    now points elsewhere: paho's reconnect is refused, and so is every delivery after it."""
    server = MosquittoServer(tmp_path / "mosquitto")
    server.start()
    resolver = MapResolver({"mqtt.test": ["127.0.0.1"]})
    sender = MqttSender(v5=True, policy=NetworkPolicy.from_cidrs(["127.0.0.1/32"]), resolver=resolver)
    where = Destination(
        protocol="MQTT5",
        sink=f"mqtt://mqtt.test:{server.port}",
        settings={"topicname": unique_name()},
        timeout=5,
    )
    try:
        await sender.deliver(make_event(), where)
        resolver.answers["mqtt.test"] = [ipaddress.ip_address("10.9.8.7")]  # the name moves
        await asyncio.to_thread(server.restart)

        async def refused_now() -> DestinationRefused | None:
            try:
                await sender.deliver(make_event(), where)
            except DestinationRefused as exc:
                return exc
            except DeliveryError:
                pass  # the drop was noticed mid-delivery; the reconnect comes next
            return None

        error = await async_wait_until(refused_now, 20, "a delivery refused after the reconnect", interval=0)
        assert isinstance(error, DestinationRefused)
        assert "mqtt.test resolves to 10.9.8.7, a private address" in str(error)
        assert sender.connections == 0
    finally:
        await sender.aclose()
        server.stop()


# -- Kafka: the brokers a cluster advertises are checked too -----------------------------------------


class AdvertisingTansu(TansuServer):
    """tansu advertising its listener under a name, as a cluster behind DNS does."""

    def command(self) -> list[str]:
        command = super().command()
        command[command.index("--advertised-listener-url") + 1] = f"tcp://kafka-advertised.test:{self.port}"
        return command


async def test_kafka_advertised_broker_at_a_refused_address_is_refused(
    server_factory: Callable[..., Any],
) -> None:
    """Bootstrap allowed, but the cluster names a broker that resolves to a private address:
    refused before any record is produced, and the producer is dropped."""
    server = server_factory(AdvertisingTansu)
    resolver = MapResolver({"kafka.test": ["127.0.0.1"], "kafka-advertised.test": ["10.20.30.40"]})
    sender = KafkaSender(policy=LOOPBACK_ALLOWED, resolver=resolver)
    where = Destination(
        protocol="KAFKA",
        sink=f"kafka://kafka.test:{server.port}",
        settings={"topicname": unique_name()},
        timeout=10,
    )
    error = await refused(sender, where)
    assert "kafka-advertised.test resolves to 10.20.30.40, a private address" in str(error)
    assert "broker" in str(error)


# -- NATS: reconnects never go to servers the cluster announces --------------------------------------


def test_nats_reconnects_stay_among_the_checked_servers() -> None:
    """Servers learned from INFO connect_urls are in nats-py's pool but never chosen."""
    choose = only_among(["nats://127.0.0.1:4222", "nats://[::1]:4223"])
    pool = [
        Server(uri=urlparse("nats://10.0.0.9:4222")),
        Server(uri=urlparse("nats://127.0.0.1:4222"), reconnects=3),
        Server(uri=urlparse("nats://[::1]:4223"), reconnects=1),
    ]
    chosen, delay = choose(pool, {})
    assert chosen is not None
    assert chosen.uri.netloc == "[::1]:4223"
    assert delay > 0
    only_discovered, _ = choose([Server(uri=urlparse("nats://10.0.0.9:4222"))], {})
    assert only_discovered is None
