"""One description per protocol of how to reach its real test server, so that the sender
contract suite (and the end-to-end tests) can be parametrized over protocols."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pytest
from ceprotocols.sender import Destination, Sender
from servers import CLOSED_PORT, MosquittoServer, NatsServer, RabbitMQServer, TansuServer
from support.sinks import Sink

from protocols.consumers import (
    AmqpConsumer,
    Consumer,
    HttpConsumer,
    KafkaConsumer,
    MqttConsumer,
    NatsConsumer,
)


@runtime_checkable
class CountsConnections(Protocol):
    """A sender that counts the connections it holds: every sender but HTTP's (which pools
    inside its client)."""

    @property
    def connections(self) -> int:
        """How many connections are open."""
        ...


def connections(sender: Sender) -> int:
    """The connections ``sender`` holds (it must count them)."""
    assert isinstance(sender, CountsConnections), f"{sender!r} does not count its connections"
    return sender.connections


@dataclass(frozen=True)
class ProtocolCase:
    """How to test one protocol against its server.

    ``sink(server, name)`` and ``settings(name, mode)`` target a fresh topic/queue/subject/path
    called ``name``; ``consumer(server, name)`` reads from it.
    """

    protocol: str
    fixture: str
    modes: tuple[str, ...]
    #: Whether attribute types survive binary mode (AMQP has native types; the others text).
    native_types: bool
    sink: Callable[[Any, str], str]
    settings: Callable[[str, str], dict[str, Any]]
    consumer: Callable[[Any, str], Awaitable[Consumer]]
    unreachable_sink: Callable[[], str]

    def destination(self, server: Any, name: str, mode: str | None = None) -> Destination:
        """Where to deliver to ``name`` on ``server`` in ``mode`` (the case's first mode when
        ``None``)."""
        return Destination(
            protocol=self.protocol,
            sink=self.sink(server, name),
            settings=self.settings(name, self.modes[0] if mode is None else mode),
        )


async def _mqtt_consumer(server: MosquittoServer, name: str, *, v5: bool) -> Consumer:
    return await MqttConsumer(server.host, server.port, name, v5=v5).ready()


async def _nats_consumer(server: NatsServer, name: str) -> Consumer:
    return await NatsConsumer().start(server.url, name)


async def _amqp_consumer(server: RabbitMQServer, name: str) -> Consumer:
    return await AmqpConsumer().start(server.url, f"/queue/{name}")


async def _kafka_consumer(server: TansuServer, name: str) -> Consumer:
    return await KafkaConsumer().start(server.bootstrap, name)


def _mqtt_settings(name: str, mode: str) -> dict[str, Any]:
    return {"topicname": name, "qos": 1, "contentmode": mode}


async def _http_consumer(sink: Sink, name: str) -> Consumer:
    return await HttpConsumer(sink, f"/{name}").start()


CASES: dict[str, ProtocolCase] = {
    "HTTP": ProtocolCase(
        protocol="HTTP",
        fixture="http_sink",
        modes=("binary", "structured"),
        native_types=False,
        sink=lambda s, name: f"{s.url}/{name}",
        settings=lambda name, mode: {"contentmode": mode},
        consumer=_http_consumer,
        unreachable_sink=lambda: f"http://127.0.0.1:{CLOSED_PORT}/hook",
    ),
    "MQTT3": ProtocolCase(
        protocol="MQTT3",
        fixture="mosquitto",
        modes=("structured",),
        native_types=False,
        sink=lambda s, name: s.url,
        settings=_mqtt_settings,
        consumer=lambda s, n: _mqtt_consumer(s, n, v5=False),
        unreachable_sink=lambda: f"mqtt://127.0.0.1:{CLOSED_PORT}",
    ),
    "MQTT5": ProtocolCase(
        protocol="MQTT5",
        fixture="mosquitto",
        modes=("binary", "structured"),
        native_types=False,
        sink=lambda s, name: s.url,
        settings=_mqtt_settings,
        consumer=lambda s, n: _mqtt_consumer(s, n, v5=True),
        unreachable_sink=lambda: f"mqtt://127.0.0.1:{CLOSED_PORT}",
    ),
    "AMQP": ProtocolCase(
        protocol="AMQP",
        fixture="rabbitmq",
        modes=("binary", "structured"),
        native_types=True,
        sink=lambda s, name: s.url,
        settings=lambda name, mode: {"address": f"/queue/{name}", "contentmode": mode},
        consumer=_amqp_consumer,
        unreachable_sink=lambda: f"amqp://127.0.0.1:{CLOSED_PORT}",
    ),
    "KAFKA": ProtocolCase(
        protocol="KAFKA",
        fixture="tansu",
        modes=("binary", "structured"),
        native_types=False,
        sink=lambda s, name: s.url,
        settings=lambda name, mode: {"topicname": name, "contentmode": mode},
        consumer=_kafka_consumer,
        unreachable_sink=lambda: f"kafka://127.0.0.1:{CLOSED_PORT}",
    ),
    "NATS": ProtocolCase(
        protocol="NATS",
        fixture="nats_server",
        modes=("binary", "structured"),
        native_types=False,
        sink=lambda s, name: s.url,
        settings=lambda name, mode: {"subject": name, "contentmode": mode},
        consumer=_nats_consumer,
        unreachable_sink=lambda: f"nats://127.0.0.1:{CLOSED_PORT}",
    ),
}


def unique_name(prefix: str = "ce") -> str:
    """A topic/queue/subject name no other test uses (valid in every protocol)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def source_url(case: ProtocolCase, server: Any, name: str) -> str:
    """An ingress source URL that consumes what ``case.settings(name, ...)`` targets."""
    if case.protocol == "MQTT3":
        return f"{server.url}/{name}?version=3"
    if case.protocol == "MQTT5":
        return f"{server.url}/{name}?qos=1"
    if case.protocol == "AMQP":
        return f"{server.url}/queue/{name}"
    if case.protocol == "KAFKA":
        return f"{server.url}/{name}?group=g-{name}&session_timeout_ms=2000"
    return f"{server.url}/{name}"


async def publish_raw(case: ProtocolCase, server: Any, name: str, payload: bytes) -> None:
    """Publish bytes that are not a CloudEvent where ``case.settings(name, ...)`` points."""
    import asyncio

    if case.protocol.startswith("MQTT"):
        import paho.mqtt.publish as publish

        await asyncio.to_thread(publish.single, name, payload, qos=1, hostname=server.host, port=server.port)
    elif case.protocol == "NATS":
        import nats

        client = await nats.connect(server.url)
        await client.publish(name, payload)
        await client.flush()
        await client.close()
    elif case.protocol == "AMQP":
        from proton import Message
        from proton.utils import BlockingConnection

        def send() -> None:
            connection = BlockingConnection(server.url, timeout=10)
            connection.create_sender(f"/queue/{name}").send(Message(body=payload, inferred=True))
            connection.close()

        await asyncio.to_thread(send)
    else:
        from confluent_kafka import Producer

        def produce() -> None:
            producer = Producer({"bootstrap.servers": server.bootstrap})
            producer.produce(name, payload)
            producer.flush(10)

        await asyncio.to_thread(produce)


MARKS = {"MQTT3": "mqtt", "MQTT5": "mqtt", "AMQP": "amqp", "KAFKA": "kafka", "NATS": "nats"}


def protocol_params(*, modes: bool = False, http: bool = False) -> list[Any]:
    """pytest params over every protocol case (and content mode), marked with the server they
    need. HTTP only when asked for: it pools connections and has no required setting, so it takes
    part in the delivery and unreachable-target contracts; its own tests cover the rest."""
    params = []
    for name, case in CASES.items():
        if name == "HTTP" and not http:
            continue
        marks = [getattr(pytest.mark, MARKS[name])] if name in MARKS else []
        if modes:
            params += [pytest.param(case, mode, id=f"{name}-{mode}", marks=marks) for mode in case.modes]
        else:
            params.append(pytest.param(case, id=name, marks=marks))
    return params
