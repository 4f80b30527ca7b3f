"""Protocol sources survive poison (issue: protocol sources and poison messages), against the real
servers: good events interleaved with every kind of poison (a nesting bomb in both content modes,
an oversized event, invalid UTF-8 in headers where the protocol carries it to us, random bytes,
missing attributes, and a decoder failing with an exception type nobody expected). Every good
event arrives exactly once; every poison is counted and kept in the source's quarantine once;
the source never restarts; after the broker restarts nothing comes back. With broker events on,
each poison set aside is announced as ``dev.cebroker.source.quarantined`` (concerning no tenant).

MQTT 5 is not sent invalid UTF-8 in user properties: the MQTT specification makes that a
malformed packet, which the server refuses before anything reaches the source."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from servers import MosquittoServer, NatsServer, RabbitMQServer, TansuServer
from support.servers import ServerThread
from support.sinks import Sink, served_sink

from cebroker.app import create_app
from cebroker.settings import Settings
from protocols.harness import unique_name

MAX_EVENT = 256 * 1024
TYPE = "poison.test"
STRUCTURED = "application/cloudevents+json"
LEVELS = 100_000
INJECT = "inject-unexpected"


@dataclass
class Message:
    """One message to publish: binary-mode attributes (raw header values) or a structured body."""

    label: str
    payload: bytes
    content_type: str | None = None
    attributes: dict[str, bytes] = field(default_factory=dict)
    good: bool = False


def _event(event_id: str, data: Any = None, **extra: Any) -> dict[str, Any]:
    event = {"specversion": "1.0", "id": event_id, "source": "/poison", "type": TYPE, **extra}
    if data is not None:
        event["data"] = data
    return event


def _structured(label: str, event: dict[str, Any] | bytes, *, good: bool = False) -> Message:
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    return Message(label, body, STRUCTURED, good=good)


def _binary(label: str, event_id: str, payload: bytes, **overrides: bytes) -> Message:
    attributes = {"specversion": b"1.0", "id": event_id.encode(), "source": b"/poison", "type": TYPE.encode()}
    return Message(label, payload, "application/json", {**attributes, **overrides})


def _messages(binary: bool, header_utf8: bool) -> list[Message]:
    bomb = b"[" * LEVELS + b"]" * LEVELS
    poisons = [
        _structured(
            "bomb-structured",
            b'{"specversion":"1.0","id":"b1","source":"/p","type":"t","data":' + bomb + b"}",
        ),
        _structured("oversized", _event("big", data="x" * (MAX_EVENT + 1))),
        Message("random-bytes", os.urandom(300)),
        _structured("missing-attributes", {"specversion": "1.0", "id": "m1"}),
        _structured("unexpected-exception", _event(INJECT)),
    ]
    if binary:
        poisons.append(_binary("bomb-binary", "b2", bomb))
    if header_utf8:
        poisons.append(_binary("invalid-utf8-header", "u1", b"{}", source=b"/bad-\xff\xfe"))
    messages: list[Message] = []
    for n, poison in enumerate(poisons):
        messages.append(_structured(f"good-{n}", _event(f"good-{n}", data={"n": n}), good=True))
        messages.append(poison)
    messages.append(_structured("good-last", _event("good-last", data={"n": -1}), good=True))
    if binary:
        good_binary = _binary("good-binary", "good-binary", b'{"b": 1}')
        good_binary.good = True
        messages.append(good_binary)
    return messages


# -- publishing, with each protocol's own client (no CloudEvents library in between) ------------


def _publish_mqtt(server: MosquittoServer, topic: str, messages: list[Message], *, v5: bool) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    publish_properties: Callable[[int], Any] = Properties  # (paho's constructor is not annotated)
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311)
    client.connect(server.host, server.port)
    client.loop_start()
    try:
        for message in messages:
            properties = None
            if v5:
                properties = publish_properties(PacketTypes.PUBLISH)
                if message.content_type:
                    properties.ContentType = message.content_type
                if message.attributes:
                    properties.UserProperty = [(k, v.decode()) for k, v in message.attributes.items()]
            client.publish(topic, message.payload, qos=1, properties=properties).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


class RawNats:
    """Publishes over the NATS text protocol directly, so header bytes go out exactly as given."""

    def __init__(self, host: str, port: int) -> None:
        self._sock = socket.create_connection((host, port), timeout=10)
        self._file = self._sock.makefile("rb")
        self._file.readline()  # INFO
        self._sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
        self.flush()

    def publish(self, subject: str, message: Message) -> None:
        headers: list[tuple[bytes, bytes]] = [(b"ce-" + k.encode(), v) for k, v in message.attributes.items()]
        if message.content_type:
            name = b"ce-datacontenttype" if message.attributes else b"Content-Type"
            headers.append((name, message.content_type.encode()))
        if not headers:
            self._sock.sendall(
                f"PUB {subject} {len(message.payload)}\r\n".encode() + message.payload + b"\r\n"
            )
            return
        block = b"NATS/1.0\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
        head = f"HPUB {subject} {len(block)} {len(block) + len(message.payload)}\r\n".encode()
        self._sock.sendall(head + block + message.payload + b"\r\n")

    def flush(self) -> None:
        self._sock.sendall(b"PING\r\n")
        while (line := self._file.readline()) != b"PONG\r\n":
            assert line, "the NATS server closed the connection"
            assert not line.startswith(b"-ERR"), line

    def close(self) -> None:
        self._file.close()
        self._sock.close()


def _publish_nats(server: NatsServer, subject: str, messages: list[Message]) -> None:
    client = RawNats(server.host, server.port)
    try:
        for message in messages:
            client.publish(subject, message)
        client.flush()
    finally:
        client.close()


def _publish_kafka(server: TansuServer, topic: str, messages: list[Message]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": server.bootstrap})
    for message in messages:
        headers: list[tuple[str, str | bytes | None]] = [
            ("ce_" + k, v) for k, v in message.attributes.items()
        ]
        if message.content_type:
            headers.append(("content-type", message.content_type.encode()))
        producer.produce(topic, message.payload, headers=headers)
    assert producer.flush(30) == 0


def _publish_amqp(server: RabbitMQServer, queue: str, messages: list[Message]) -> None:
    from proton import Message as ProtonMessage
    from proton.utils import BlockingConnection

    connection = BlockingConnection(server.url, timeout=10)
    try:
        sender = connection.create_sender(f"/queue/{queue}")
        for message in messages:
            properties: dict[str, Any] = {}
            for name, value in message.attributes.items():
                try:  # AMQP strings are UTF-8 by type: undecodable bytes can only travel as binary
                    properties[f"cloudEvents_{name}"] = value.decode()
                except UnicodeDecodeError:
                    properties[f"cloudEvents_{name}"] = value
            sender.send(
                ProtonMessage(
                    body=message.payload,
                    inferred=True,
                    content_type=message.content_type,
                    properties=properties,
                )
            )
    finally:
        connection.close()


# -- the protocol cases ------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    fixture: str
    binary: bool
    header_utf8: bool
    source: Callable[[Any, str], str]
    publish: Callable[[Any, str, list[Message]], None]
    binding: str
    setup: Callable[[Any, str], None] | None = None


def _jetstream_setup(server: NatsServer, name: str) -> None:
    import nats

    async def create() -> None:
        client = await nats.connect(server.url)
        try:
            await client.jetstream().add_stream(name=name.replace("-", "_"), subjects=[f"{name}.>"])
        finally:
            await client.close()

    asyncio.run(create())


CASES = [
    Case(
        "MQTT5",
        "mosquitto",
        True,
        False,
        lambda s, n: f"{s.url}/{n}?qos=1",
        lambda s, n, m: _publish_mqtt(s, n, m, v5=True),
        "mqtt",
    ),
    Case(
        "MQTT3",
        "mosquitto",
        False,
        False,
        lambda s, n: f"{s.url}/{n}?version=3",
        lambda s, n, m: _publish_mqtt(s, n, m, v5=False),
        "mqtt",
    ),
    Case("NATS", "nats_server", True, True, lambda s, n: f"{s.url}/{n}", _publish_nats, "nats"),
    Case(
        "JetStream",
        "nats_server",
        True,
        True,
        lambda s, n: f"{s.url}/{n}.>?stream={n.replace('-', '_')}&durable=d",
        lambda s, n, m: _publish_nats(s, f"{n}.x", m),
        "nats",
        _jetstream_setup,
    ),
    Case(
        "KAFKA",
        "tansu",
        True,
        True,
        lambda s, n: f"{s.url}/{n}?group=g-{n}&session_timeout_ms=2000",
        _publish_kafka,
        "kafka",
    ),
    Case("AMQP", "rabbitmq", True, True, lambda s, n: f"{s.url}/queue/{n}", _publish_amqp, "amqp"),
]
MARKS = {"mosquitto": "mqtt", "nats_server": "nats", "tansu": "kafka", "rabbitmq": "amqp"}


@pytest.fixture
def inject_unexpected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every binding's decoder fails with an exception type no decoder expects on one event."""
    import importlib

    for protocol in ("mqtt", "nats", "kafka", "amqp"):
        module = importlib.import_module(f"ceprotocols.{protocol}.binding")
        original = module.from_message

        def failing(message: Any, original: Callable[[Any], dict[str, Any]] = original) -> dict[str, Any]:
            event = original(message)
            if event.get("id") == INJECT:
                raise ZeroDivisionError("injected")
            return event

        monkeypatch.setattr(module, "from_message", failing)


class Broker:
    """The broker app served on a free port, restartable on the same database."""

    def __init__(self, db: Path, source: str, sink: Sink, *, broker_events: bool = False) -> None:
        self.settings = Settings(
            db=db,
            sources=(source,),
            max_event_size=MAX_EVENT,
            webhook_validation=False,
            broker_events=broker_events,
        )
        self.sink = sink
        self.server: ServerThread | None = None

    def start(self) -> httpx.Client:
        self.server = ServerThread(create_app(self.settings)).__enter__()
        return httpx.Client(base_url=self.server.url, timeout=30)

    def stop(self) -> None:
        if self.server is not None:
            self.server.__exit__(None, None, None)
            self.server = None


def _metric(http: httpx.Client, name: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(name + '{source="') and not line.startswith("#"):
            return float(line.rsplit(" ", 1)[1])
    return -1.0


def _until(check: Callable[[], Any], what: str, within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def sink() -> Iterator[Sink]:
    with served_sink() as recorder:
        yield recorder


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name, marks=getattr(pytest.mark, MARKS[c.fixture])) for c in CASES]
)
def test_poison_is_refused_once_and_good_events_arrive_once(
    case: Case, request: pytest.FixtureRequest, tmp_path: Path, sink: Sink, inject_unexpected: None
) -> None:
    server = request.getfixturevalue(case.fixture)
    name = unique_name("poison")
    if case.setup is not None:
        case.setup(server, name)
    broker = Broker(tmp_path / "broker.db", case.source(server, name), sink)
    messages = _messages(case.binary, case.header_utf8)
    goods = {m.label for m in messages if m.good}
    poisons = [m.label for m in messages if not m.good]
    http = broker.start()
    try:
        sub = {"protocol": "HTTP", "sink": f"{sink.url}/in", "types": [TYPE]}
        assert http.post("/subscriptions", json=sub).status_code == 201
        _until(lambda: _metric(http, "cebroker_source_subscribed") == 1.0, "the source to subscribe")
        case.publish(server, name, messages)

        _until(lambda: {r.headers["ce-id"] for r in sink.at("/in")} >= goods, "every good event")
        _until(lambda: _metric(http, "cebroker_source_invalid_total") >= len(poisons), "every poison counted")
        rejects = http.get("/sources").json()[0]["rejectsUrl"]
        kept = http.get(rejects, params={"limit": 500}).json()
        reasons = [item["reason"] for item in kept["items"]]
        assert len(reasons) == len(poisons), reasons
        assert _metric(http, "cebroker_source_invalid_total") == len(poisons)
        assert _metric(http, "cebroker_source_restarts_total") == 0
        assert _metric(http, "cebroker_source_subscribed") == 1.0
        joined = "\n".join(reasons)
        assert "nested more than 128 levels" in joined
        assert f"over the limit of {MAX_EVENT} bytes" in joined
        assert "ZeroDivisionError" in joined
        assert any(item["truncated"] for item in kept["items"])  # the oversized one, cut short
    finally:
        http.close()
        broker.stop()

    # After a restart nothing comes back: a marker event published now arrives, and with it no
    # earlier message, good or poison.
    http = broker.start()
    try:
        _until(lambda: _metric(http, "cebroker_source_subscribed") == 1.0, "the source to subscribe again")
        case.publish(server, name, [_structured("marker", _event("marker"), good=True)])
        _until(lambda: "marker" in {r.headers["ce-id"] for r in sink.at("/in")}, "the marker")
        ids = [r.headers["ce-id"] for r in sink.at("/in")]
        assert sorted(ids) == sorted(goods | {"marker"})  # each exactly once
        assert _metric(http, "cebroker_source_invalid_total") == 0
        assert http.get("/sources").json()[0]["invalid"] == 0
    finally:
        http.close()
        broker.stop()


@pytest.mark.nats
def test_a_quarantined_message_is_announced(nats_server: NatsServer, tmp_path: Path, sink: Sink) -> None:
    name = unique_name("quarantined")
    broker = Broker(tmp_path / "broker.db", f"{nats_server.url}/{name}", sink, broker_events=True)
    http = broker.start()
    try:
        ops = {
            "protocol": "HTTP",
            "sink": f"{sink.url}/ops",
            "types": ["dev.cebroker.source.quarantined"],
            "protocolsettings": {"contentmode": "structured"},
        }
        assert http.post("/subscriptions", json=ops).status_code == 201
        _until(lambda: _metric(http, "cebroker_source_subscribed") == 1.0, "the source to subscribe")
        poison = _structured("missing-attributes", {"specversion": "1.0", "id": "m1"})
        good = _structured("good", _event("good", data={"n": 1}), good=True)
        _publish_nats(nats_server, name, [poison, good])
        (got,) = [json.loads(r.body) for r in sink.wait("/ops", 1, timeout=30.0)]
        assert got["type"] == "dev.cebroker.source.quarantined"
        assert "cebrokertenant" not in got  # a source concerns no tenant
        source = http.get("/sources").json()[0]
        assert got["data"]["source"] == source["name"]
        (kept,) = http.get(source["rejectsUrl"]).json()["items"]
        assert got["data"]["reason"] == kept["reason"]
        assert got["data"]["size"] == kept["size"] == len(poison.payload)
        assert got["data"]["time"] == kept["time"]
    finally:
        http.close()
        broker.stop()


@pytest.mark.mqtt
def test_mqtt_server_refuses_invalid_utf8_in_user_properties(mosquitto: MosquittoServer) -> None:
    """Why the MQTT cases send no invalid UTF-8 header: the server closes the publisher's
    connection (a malformed packet, MQTT 5 section 1.5.4), so it never reaches a source."""

    def string(data: bytes) -> bytes:
        return len(data).to_bytes(2, "big") + data

    with socket.create_connection((mosquitto.host, mosquitto.port), timeout=10) as sock:
        connect = string(b"MQTT") + bytes([5, 0x02]) + (30).to_bytes(2, "big") + b"\x00" + string(b"raw-utf8")
        sock.sendall(bytes([0x10, len(connect)]) + connect)
        header = sock.recv(2)
        assert header[:1] == b"\x20"  # CONNACK
        remaining = header[1]
        while remaining:
            remaining -= len(sock.recv(remaining))
        properties = b"\x26" + string(b"id") + string(b"\xff\xfe")  # a User Property
        publish = string(b"t/utf8") + (1).to_bytes(2, "big") + bytes([len(properties)]) + properties + b"x"
        sock.sendall(bytes([0x32, len(publish)]) + publish)
        assert sock.recv(16) == b""  # closed by the server, no PUBACK
