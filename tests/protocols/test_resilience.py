"""Resilience per protocol: the sink's server is stopped while events keep arriving at the
broker; when it restarts on the same port, every event is delivered (accepted means durable;
at-least-once delivery with retries). Each test runs its own server, so stopping it disturbs
no other test."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ceprotocols.nats import binding as nats_binding
from servers import MosquittoServer, NatsServer, RabbitMQServer, ServerProcess, TansuServer
from support.broker import Broker
from support.waiting import async_wait_until

from protocols.ce_samples import make_event
from protocols.consumers import AmqpConsumer, Consumer, KafkaConsumer, MqttConsumer
from protocols.harness import unique_name

pytestmark = pytest.mark.slow
STRUCTURED = {"content-type": "application/cloudevents+json"}
#: Retry quickly so the test does not wait out production backoffs.
FAST_RETRY = {"backoff": "linear", "initialdelay": "0.3", "maxdelay": "1", "timeout": "3"}


@pytest.fixture
def broker_url(make_broker: Callable[..., Broker]) -> str:
    return make_broker().url


class NatsStreamReader(Consumer):
    """Reads a JetStream stream from its start (it is stored in the server's directory)."""

    async def read_all(self, url: str, stream: str, subject: str, count: int) -> set[str]:
        import nats

        client = await nats.connect(url)
        try:
            js = client.jetstream()
            sub = await js.pull_subscribe(subject, stream=stream)
            ids: set[str] = set()
            async with asyncio.timeout(30):
                while len(ids) < count:
                    try:
                        for msg in await sub.fetch(count, timeout=1):
                            message = nats_binding.NatsMessage(payload=msg.data, headers=msg.headers)
                            ids.add(nats_binding.from_message(message)["id"])
                            await msg.ack()
                    except nats.errors.TimeoutError:
                        continue
            return ids
        finally:
            await client.close()

    async def close(self) -> None:
        return None


async def _post(http: httpx.AsyncClient, events: list[dict[str, Any]]) -> None:
    for event in events:
        response = await http.post("/events", json=event, headers=STRUCTURED)
        assert response.status_code == 202, response.text


async def _failing(http: httpx.AsyncClient, subscription: str) -> None:
    """Wait until the broker has recorded failed attempts to the stopped server (and so keeps
    retrying them), rather than for a fixed while."""

    async def failed() -> int:
        return int((await http.get(f"/subscriptions/{subscription}/status")).json()["failed"])

    await async_wait_until(failed, 60, "failed attempts recorded", interval=0.1)


async def _ids(consumer: Consumer, wanted: set[str]) -> set[str]:
    """Every id received until all of ``wanted`` has come (delivery is at-least-once: a message
    may come twice, so a count of messages is not a count of events); fails after 60 s."""
    seen: set[str] = set()
    async with asyncio.timeout(60):
        while not wanted <= seen:
            seen |= {r.event["id"] for r in await consumer.receive(1, within=60)}
    return seen


async def _scenario(
    server: ServerProcess,
    broker_url: str,
    subscription: dict[str, Any],
    open_consumer: Callable[[], Any],
    *,
    reopen_after_restart: bool,
) -> tuple[set[str], set[str]]:
    """Deliver 5 events, stop the server, post 5 more, restart it; returns (sent ids, seen ids)."""
    before = [make_event() for _ in range(5)]
    during = [make_event() for _ in range(5)]
    consumer: Consumer = await open_consumer()
    seen: set[str] = set()
    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as http:
        response = await http.post("/subscriptions", json={**subscription, "config": FAST_RETRY})
        assert response.status_code == 201, response.text
        await _post(http, before)
        seen |= await _ids(consumer, {e["id"] for e in before})
        await asyncio.to_thread(server.stop)
        await _post(http, during)
        await _failing(http, response.json()["id"])  # deliveries fail and are retried meanwhile
        if reopen_after_restart:
            await consumer.close()
        await asyncio.to_thread(server.start)
        if reopen_after_restart:
            consumer = await open_consumer()
        seen |= await _ids(consumer, {e["id"] for e in during})
    await consumer.close()
    return {e["id"] for e in before + during}, seen


@pytest.mark.mqtt
@pytest.mark.parametrize("protocol", ["MQTT3", "MQTT5"])
async def test_mqtt_sink_restart(protocol: str, server_factory: Callable[..., Any], broker_url: str) -> None:
    """mosquitto restarts with its persisted sessions; the consumer's session queued the rest."""
    server: MosquittoServer = server_factory(MosquittoServer, persistent=True)
    topic = unique_name()
    session = unique_name("session")

    async def consumer() -> Consumer:
        return await MqttConsumer(server.host, server.port, topic, v5=False, session=session).ready()

    sent, seen = await _scenario(
        server,
        broker_url,
        {
            "protocol": protocol,
            "sink": server.url,
            "protocolsettings": {"topicname": topic, "contentmode": "structured"},
        },
        consumer,
        reopen_after_restart=False,
    )
    assert seen == sent


@pytest.mark.kafka
async def test_kafka_sink_restart(server_factory: Callable[..., Any], broker_url: str) -> None:
    """tansu (in-memory) restarts empty; the events that failed meanwhile are produced again."""
    server: TansuServer = server_factory(TansuServer)
    topic = unique_name()
    sent, seen = await _scenario(
        server,
        broker_url,
        {"protocol": "KAFKA", "sink": server.url, "protocolsettings": {"topicname": topic}},
        lambda: KafkaConsumer().start(server.bootstrap, topic),
        reopen_after_restart=True,
    )
    assert seen == sent


@pytest.mark.amqp
async def test_amqp_sink_restart(server_factory: Callable[..., Any], broker_url: str) -> None:
    """RabbitMQ restarts; the sender reconnects and the queue receives what failed meanwhile."""
    server: RabbitMQServer = server_factory(RabbitMQServer)
    queue = unique_name()
    sent, seen = await _scenario(
        server,
        broker_url,
        {"protocol": "AMQP", "sink": server.url, "protocolsettings": {"address": f"/queue/{queue}"}},
        lambda: AmqpConsumer().start(server.url, f"/queue/{queue}"),
        reopen_after_restart=True,
    )
    assert seen == sent


@pytest.mark.nats
async def test_nats_jetstream_sink_restart(server_factory: Callable[..., Any], broker_url: str) -> None:
    """nats-server restarts with its JetStream store; every event ends up in the stream."""
    import nats

    server: NatsServer = server_factory(NatsServer)
    subject = f"{unique_name()}.events"
    stream = unique_name("S").replace("-", "_")
    client = await nats.connect(server.url)
    await client.jetstream().add_stream(name=stream, subjects=[subject])
    await client.close()
    events = [make_event() for _ in range(10)]
    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as http:
        subscription = {"protocol": "NATS", "sink": server.url, "protocolsettings": {"subject": subject}}
        response = await http.post("/subscriptions", json={**subscription, "config": FAST_RETRY})
        assert response.status_code == 201, response.text
        await _post(http, events[:5])
        assert await NatsStreamReader().read_all(server.url, stream, subject, 5) == {
            e["id"] for e in events[:5]
        }
        await asyncio.to_thread(server.stop)
        await _post(http, events[5:])
        await _failing(http, response.json()["id"])
        await asyncio.to_thread(server.start)
        assert await NatsStreamReader().read_all(server.url, stream, subject, 10) == {e["id"] for e in events}
