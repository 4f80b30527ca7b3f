"""Protocol-specific confirmation and settings, against the real servers: a delivery returns only
once the server holds the message (JetStream ack, retained MQTT message, Kafka record with its
key), and the optional settings reach the wire (QoS 2, settled AMQP links, link name/properties)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ceprotocols.amqp import binding as amqp_binding
from ceprotocols.amqp.connection import AmqpConnection
from ceprotocols.amqp.engine import ProtonStream
from ceprotocols.amqp.settings import SCHEMES, parse_settings
from ceprotocols.endpoint import sink_endpoint
from ceprotocols.kafka.producer import KafkaProducer
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from servers import MosquittoServer, NatsServer, RabbitMQServer, TansuServer

from protocols.ce_samples import make_event
from protocols.consumers import AmqpConsumer, KafkaConsumer, MqttConsumer
from protocols.harness import unique_name


async def deliver(
    protocol: str, sink: str, settings: dict[str, Any], event: dict[str, Any] | None = None
) -> None:
    sender = create_sender(protocol)
    try:
        await sender.deliver(
            event or make_event(), Destination(protocol=protocol, sink=sink, settings=settings)
        )
    finally:
        await sender.aclose()


@pytest.mark.nats
async def test_nats_stream_subject_is_stored_when_delivery_returns(nats_server: NatsServer) -> None:
    """When a stream holds the subject, the sender waits for JetStream's publish ack: the stream
    has the message the moment ``deliver`` returns."""
    import nats

    subject = f"{unique_name()}.orders"
    stream = unique_name("S").replace("-", "_")
    client = await nats.connect(nats_server.url)
    try:
        js = client.jetstream()
        await js.add_stream(name=stream, subjects=[subject])
        await deliver("NATS", nats_server.url, {"subject": subject})
        info = await js.stream_info(stream)
        assert info.state.messages == 1
    finally:
        await client.close()


@pytest.mark.mqtt
@pytest.mark.parametrize("qos", [0, 1, 2])
async def test_mqtt_retained_message_is_held_when_delivery_returns(
    qos: int, mosquitto: MosquittoServer
) -> None:
    """With ``retain``, a subscriber that arrives after ``deliver`` returned still gets the event
    (MQTT 3.3.1.3), for every QoS (QoS 2 completes on PUBCOMP)."""
    topic = unique_name()
    event = make_event()
    await deliver("MQTT5", mosquitto.url, {"topicname": topic, "qos": qos, "retain": True}, event)
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, topic, v5=True).ready()
    try:
        [received] = await consumer.receive(1)
        assert received.event["id"] == event["id"]
        assert received.raw.retain
    finally:
        await consumer.close()


@pytest.mark.mqtt
async def test_mqtt5_expiry_and_user_properties_reach_the_wire(mosquitto: MosquittoServer) -> None:
    """``expiry`` is the PUBLISH Message Expiry Interval; ``userproperties`` are added."""
    topic = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, topic, v5=True).ready()
    try:
        settings = {"topicname": topic, "expiry": 300, "userproperties": {"tenant": "acme"}}
        await deliver("MQTT5", mosquitto.url, settings)
        [received] = await consumer.receive(1)
        properties = received.raw.properties
        assert ("tenant", "acme") in properties.UserProperty
        assert 0 < properties.MessageExpiryInterval <= 300
    finally:
        await consumer.close()


@pytest.mark.amqp
@pytest.mark.parametrize("mode", ["settled", "unsettled"])
async def test_amqp_settlement_modes_and_link_settings(mode: str, rabbitmq: RabbitMQServer) -> None:
    """Both settlement modes deliver; ``linkname`` and ``linkproperties`` are accepted on attach."""
    queue = f"/queue/{unique_name()}"
    consumer = await AmqpConsumer().start(rabbitmq.url, queue)
    try:
        settings = {
            "address": queue,
            "sendersettlementmode": mode,
            "linkname": unique_name("link"),
            "linkproperties": {"origin": "cebroker"},
        }
        event = make_event()
        await deliver("AMQP", rabbitmq.url, settings, event)
        [received] = await consumer.receive(1)
        assert received.event["id"] == event["id"]
    finally:
        await consumer.close()


@pytest.mark.kafka
async def test_kafka_record_key_from_the_key_attribute(tansu: TansuServer) -> None:
    """``partitionkeyextractor`` names the attribute whose value is the record key; by default
    the ``partitionkey`` extension; the event itself is unchanged (Kafka binding 3.1)."""
    topic = unique_name()
    consumer = await KafkaConsumer().start(tansu.bootstrap, topic)
    try:
        keyed = make_event(partitionkey="customer-9")
        by_subject = make_event(subject="order-77")
        await deliver("KAFKA", tansu.url, {"topicname": topic, "acks": "1"}, keyed)
        await deliver(
            "KAFKA", tansu.url, {"topicname": topic, "partitionkeyextractor": "subject"}, by_subject
        )
        received = {r.event["id"]: r for r in await consumer.receive(2)}
        assert received[keyed["id"]].raw.key == b"customer-9"
        assert received[by_subject["id"]].raw.key == b"order-77"
        assert "partitionkey" not in received[by_subject["id"]].event
    finally:
        await consumer.close()


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size in bytes of every write of an AMQP connection's frames, from now on."""
    writes: list[int] = []
    flush = ProtonStream.flush

    def counted(self: ProtonStream) -> None:
        pending = self.transport.pending()
        if pending > 0:
            writes.append(pending)
        flush(self)

    monkeypatch.setattr(ProtonStream, "flush", counted)
    return writes


@pytest.mark.amqp
async def test_amqp_sends_of_one_turn_go_out_in_one_write(
    rabbitmq: RabbitMQServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sends made in one turn of the event loop (a window's) are written together, one write
    for all of them instead of one round trip each; sends that arrive over a few turns (as a
    window's successors do after its outcomes) take one write per turn, none waiting for
    another's outcome; every one still gets its own outcome."""
    queue = f"/queue/{unique_name()}"
    settings = parse_settings({"address": queue}, sink_endpoint(rabbitmq.url, schemes=SCHEMES))
    connection = await AmqpConnection(rabbitmq.url, None).open(10.0)
    consumer = await AmqpConsumer().start(rabbitmq.url, queue)

    async def send(n: int) -> None:
        for _ in range(n % 4):  # arrives n % 4 turns later
            await asyncio.sleep(0)
        await connection.send(settings, amqp_binding.to_binary(make_event()), 10.0)

    try:
        await send(0)  # (the link attached)
        writes = _count_writes(monkeypatch)
        await asyncio.gather(*(send(0) for _ in range(16)))
        assert len(writes) == 1
        writes.clear()
        await asyncio.gather(*(send(n) for n in range(16)))
        assert 1 <= len(writes) <= 4
        assert len(await consumer.receive(33)) == 33
    finally:
        await consumer.close()
        await connection.close()


@pytest.mark.amqp
async def test_amqp_one_group_of_sends_to_two_links_reaches_each_queue(
    rabbitmq: RabbitMQServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sends of one turn that alternate between two links (one settled when sent, one settled by
    the peer) go out in one write, each message on its own link: the link is looked up once for
    the sends that follow one another with the same settings, and again when they change."""
    writes = _count_writes(monkeypatch)
    endpoint = sink_endpoint(rabbitmq.url, schemes=SCHEMES)
    queues = [f"/queue/{unique_name()}", f"/queue/{unique_name()}"]
    settings = [
        parse_settings({"address": queues[0]}, endpoint),
        parse_settings({"address": queues[1], "sendersettlementmode": "settled"}, endpoint),
    ]
    connection = await AmqpConnection(rabbitmq.url, None).open(10.0)
    consumers = [await AmqpConsumer().start(rabbitmq.url, queue) for queue in queues]
    events = [make_event() for _ in range(12)]
    try:
        # Both links opened first: a send on a link settled when sent waits for its credit.
        await connection.send(settings[0], amqp_binding.to_binary(make_event()), 10.0)
        await connection.send(settings[1], amqp_binding.to_binary(make_event()), 10.0)
        await asyncio.sleep(0)  # (a settled send returns before its write, due at the turn's end)
        writes.clear()
        # 0, 0, 1, 1, 0, 1, ...: runs of one link and single sends between them.
        links = [0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0]
        await asyncio.gather(
            *(
                connection.send(settings[link], amqp_binding.to_binary(event), 10.0)
                for link, event in zip(links, events, strict=True)
            )
        )
        assert len(writes) == 1
        for which, consumer in enumerate(consumers):
            wanted = {e["id"] for link, e in zip(links, events, strict=True) if link == which}
            received = await consumer.receive(len(wanted) + 1)
            assert {r.event["id"] for r in received} - wanted == {received[0].event["id"]}
            assert wanted <= {r.event["id"] for r in received}
    finally:
        for consumer in consumers:
            await consumer.close()
        await connection.close()


@pytest.mark.kafka
async def test_kafka_reports_of_one_poll_reach_the_loop_together(
    tansu: TansuServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delivery reports one ``poll`` serves are handed to the event loop in one call (a
    produce request's records wake the loop once, not once each); each delivery still completes
    on its own report."""
    handed: list[int] = []
    settle_all = KafkaProducer._settle_all

    def counted(self: KafkaProducer, reports: list[Any]) -> None:
        handed.append(len(reports))
        settle_all(self, reports)

    monkeypatch.setattr(KafkaProducer, "_settle_all", counted)
    topic = unique_name()
    sender = create_sender("KAFKA")
    destination = Destination(protocol="KAFKA", sink=tansu.url, settings={"topicname": topic, "acks": "all"})
    consumer = await KafkaConsumer().start(tansu.bootstrap, topic)
    try:
        await sender.deliver(make_event(), destination)  # connected, metadata known
        await asyncio.gather(*(sender.deliver(make_event(), destination) for _ in range(32)))
        assert sum(handed) == 33
        assert len(handed) < 33
        assert max(handed) > 1
        assert len(await consumer.receive(33)) == 33
    finally:
        await consumer.close()
        await sender.aclose()


@pytest.mark.nats
async def test_nats_a_cancelled_delivery_leaves_its_flush_round_to_the_others(
    nats_server: NatsServer,
) -> None:
    """Deliveries published in one turn share a flush round: cancelling one of them (its
    attempt timed out, the broker stops) cancels its own wait only; the others still return
    once the server has the messages, and a later delivery opens a round of its own."""
    import nats

    subject = unique_name()
    client = await nats.connect(nats_server.url)
    subscription = await client.subscribe(subject)
    await client.flush()
    sender = create_sender("NATS")
    destination = Destination(protocol="NATS", sink=nats_server.url, settings={"subject": subject})
    try:
        await sender.deliver(make_event(), destination)  # connected, the subject's stream looked up
        await subscription.next_msg(timeout=5)
        deliveries = [asyncio.create_task(sender.deliver(make_event(), destination)) for _ in range(3)]
        await asyncio.sleep(0)  # each has published and waits in the same round
        deliveries[1].cancel()
        done = await asyncio.wait_for(asyncio.gather(*deliveries, return_exceptions=True), 10)
        assert isinstance(done[1], asyncio.CancelledError)
        assert done[0] is None
        assert done[2] is None
        await asyncio.wait_for(sender.deliver(make_event(), destination), 10)
        received = [await subscription.next_msg(timeout=5) for _ in range(4)]
        assert len(received) == 4  # the cancelled one was published before it was cancelled
    finally:
        await sender.aclose()
        await client.close()
