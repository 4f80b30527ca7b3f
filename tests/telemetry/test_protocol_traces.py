"""The same trace through protocols: an event published on MQTT 5 with a ``traceparent`` user
property (which MQTT 5 binary mode reads as the event's distributed-tracing attribute) is
ingested by ``--source``, gets a publish span in the producer's trace, and reaches a Kafka sink
whose record carries the Kafka attempt span's context in its ``traceparent`` header."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from ceprotocols.tracecontext import TraceContext
from protocols.ce_samples import make_event
from protocols.consumers import KafkaConsumer
from protocols.harness import ProtocolCase, protocol_params, source_url, unique_name
from servers import MosquittoServer, TansuServer
from support.broker import Broker
from support.otlp import Receiver, served_receiver
from support.sinks import Sink
from support.waiting import async_wait_until

TRACE_ID = "5bf92f3577b34da6a3ce929d0e0e4737"
PRODUCER_SPAN = "10f067aa0ba902b8"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with served_receiver() as found:
        yield found


@pytest.mark.mqtt
@pytest.mark.kafka
async def test_mqtt5_source_to_kafka_sink_is_one_trace(
    receiver: Receiver,
    mosquitto: MosquittoServer,
    tansu: TansuServer,
    make_broker: Callable[..., Broker],
    sink: Sink,
) -> None:
    topic = unique_name()
    kafka_topic = unique_name()
    kafka = await KafkaConsumer().start(tansu.bootstrap, kafka_topic)
    broker = make_broker(
        sources=(f"{mosquitto.url}/traced/{topic}/#",), otel_exporter_otlp_endpoint=receiver.url
    )
    try:
        async with httpx.AsyncClient(base_url=broker.url, timeout=30) as http:
            for sub in (
                {"protocol": "KAFKA", "sink": tansu.url, "protocolsettings": {"topicname": kafka_topic}},
                {"protocol": "HTTP", "sink": f"{sink.url}/hook"},
            ):
                assert (await http.post("/subscriptions", json=sub)).status_code == 201
        event = make_event("json-object")
        publisher = create_sender("MQTT5")
        destination = Destination(
            protocol="MQTT5", sink=mosquitto.url, settings={"topicname": f"traced/{topic}/a"}
        )
        producer = TraceContext(f"00-{TRACE_ID}-{PRODUCER_SPAN}-01")

        async def arrived() -> bool:
            if sink.at("/hook"):
                return True
            await publisher.deliver(event, destination, trace=producer)
            return False

        try:
            # The source subscribes after start-up: publish until one copy was consumed (the
            # repeats are duplicates by source and id, acknowledged and not delivered again).
            await async_wait_until(arrived, 30, "the event at the HTTP sink", interval=0.5)
        finally:
            await publisher.aclose()
        [received] = await kafka.receive(1, within=30)
    finally:
        await kafka.close()

    [publish] = receiver.wait_spans(TRACE_ID, "publish", 1)
    assert publish.parent_id == PRODUCER_SPAN
    [attempt] = receiver.wait_spans(TRACE_ID, "send KAFKA", 1)
    assert attempt.parent_id == publish.span_id
    assert attempt.attributes["cebroker.delivery.protocol"] == "KAFKA"
    assert attempt.attributes["cebroker.delivery.outcome"] == "delivered"
    assert attempt.attributes["server.address"] == "127.0.0.1"
    # The Kafka record continues the trace from the attempt span; the event's own attribute is
    # forwarded unchanged (ce_traceparent).
    assert received.raw.header("traceparent") == f"00-{TRACE_ID}-{attempt.span_id}-01".encode()
    assert received.raw.header("ce_traceparent") == f"00-{TRACE_ID}-{PRODUCER_SPAN}-01".encode()


SOURCE_PARAMS = [
    p for p in protocol_params(modes=True) if p.values[0].protocol in ("MQTT5", "KAFKA", "NATS", "AMQP")
]


@pytest.mark.parametrize(("case", "mode"), SOURCE_PARAMS)
async def test_a_protocol_source_takes_the_context_its_message_carried(
    case: ProtocolCase,
    mode: str,
    receiver: Receiver,
    request: pytest.FixtureRequest,
    make_broker: Callable[..., Broker],
    sink: Sink,
) -> None:
    """A message's own ``traceparent`` header or property (not an attribute of the event) is the
    parent of the event's publish span, in every content mode."""
    server = request.getfixturevalue(case.fixture)
    name = unique_name()
    broker = make_broker(sources=(source_url(case, server, name),), otel_exporter_otlp_endpoint=receiver.url)
    broker.subscribe(f"{sink.url}/in")
    trace_id = uuid.uuid4().hex
    producer = TraceContext(f"00-{trace_id}-{PRODUCER_SPAN}-01")
    sender = create_sender(case.protocol)
    event = make_event("json-object")

    async def arrived() -> bool:
        if sink.at("/in"):
            return True
        await sender.deliver(event, case.destination(server, name, mode), trace=producer)
        return False

    try:
        await async_wait_until(arrived, 45, "the event at the HTTP sink", interval=0.5)
    finally:
        await sender.aclose()
    # Published until consumed: repeats are duplicates, each with a publish span of its own.
    publishes = receiver.wait_spans(trace_id, "publish", 1)
    assert {span.parent_id for span in publishes} == {PRODUCER_SPAN}
    [delivered] = sink.at("/in")[:1]
    assert delivered.headers["traceparent"].split("-")[1] == trace_id
    if (case.protocol, mode) != ("MQTT5", "binary"):  # there user properties are the attributes
        assert "ce-traceparent" not in delivered.headers  # the message's context, not the event's
