"""End to end through a running broker: a subscription created with the HTTP API delivers an
event posted to ``/events`` to the protocol's real server, where a consumer decodes it (and, for
Kafka and AMQP, the official SDK decodes the raw message too); an event published on MQTT and
ingested by ``--source`` arrives at a Kafka sink and at an HTTP sink (the bridge)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ceprotocols.amqp.binding import Timestamp
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from cloudevents.core.bindings import amqp as sdk_amqp
from cloudevents.core.bindings import kafka as sdk_kafka
from cloudevents.core.formats.json import JSONFormat
from servers import MosquittoServer, TansuServer
from support.broker import Broker
from support.sinks import Sink
from support.waiting import async_wait_until

from protocols.ce_samples import as_strings, make_event
from protocols.consumers import KafkaConsumer
from protocols.harness import ProtocolCase, protocol_params, unique_name

STRUCTURED = {"content-type": "application/cloudevents+json"}


def sdk_check(case: ProtocolCase, raw: Any, event: dict[str, Any]) -> None:
    """The official SDK decodes the raw message to the same id, type and extension."""
    fmt = JSONFormat()
    if case.protocol == "KAFKA":
        decoded = sdk_kafka.from_kafka(
            sdk_kafka.KafkaMessage(headers=dict(raw.headers), key=raw.key, value=raw.value or b""), fmt
        )
    elif case.protocol == "AMQP":
        props = {
            k: v.millis if isinstance(v, Timestamp) else v for k, v in raw.application_properties.items()
        }
        decoded = sdk_amqp.from_amqp(
            sdk_amqp.AMQPMessage(
                properties={"content-type": raw.content_type} if raw.content_type else {},
                application_properties=props,
                application_data=raw.body or b"",
            ),
            fmt,
        )
    else:
        return
    assert decoded.get_id() == event["id"]
    assert decoded.get_type() == event["type"]
    assert str(decoded.get_extension("intext")) == "42"


@pytest.mark.parametrize(("case", "mode"), protocol_params(modes=True))
async def test_subscription_delivers_posted_event_to_the_protocol(
    case: ProtocolCase,
    mode: str,
    server_of: Callable[[ProtocolCase], Any],
    make_broker: Callable[..., Broker],
) -> None:
    """POST /subscriptions (protocol, sink, protocolsettings) then POST /events: the consumer on
    the real server receives the event with every attribute and the data intact."""
    server = server_of(case)
    name = unique_name()
    consumer = await case.consumer(server, name)
    url = make_broker().url
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            subscription = {
                "protocol": case.protocol,
                "sink": case.sink(server, name),
                "protocolsettings": case.settings(name, mode),
                "filters": [{"exact": {"subject": name}}],
            }
            response = await http.post("/subscriptions", json=subscription)
            assert response.status_code == 201, response.text
            event = make_event("json-object", subject=name)
            response = await http.post("/events", json=event, headers=STRUCTURED)
            assert response.status_code == 202, response.text
        [received] = await consumer.receive(1, within=30)
        assert received.event == (event if mode == "structured" or case.native_types else as_strings(event))
        if mode == "binary":
            sdk_check(case, received.raw, event)
    finally:
        await consumer.close()


@pytest.mark.mqtt
@pytest.mark.kafka
async def test_event_published_on_mqtt_reaches_kafka_and_http_sinks(
    mosquitto: MosquittoServer, tansu: TansuServer, make_broker: Callable[..., Broker], sink: Sink
) -> None:
    """The bridge: an MQTT source ingests the event; a KAFKA and an HTTP subscription both get it."""

    topic = unique_name()
    kafka_topic = unique_name()
    kafka = await KafkaConsumer().start(tansu.bootstrap, kafka_topic)
    url = make_broker(sources=(f"{mosquitto.url}/bridge/{topic}/#",)).url
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for sub in (
                {"protocol": "KAFKA", "sink": tansu.url, "protocolsettings": {"topicname": kafka_topic}},
                {"protocol": "HTTP", "sink": f"{sink.url}/hook"},
            ):
                assert (await http.post("/subscriptions", json=sub)).status_code == 201
        event = make_event("json-object")
        publisher = create_sender("MQTT5")
        destination = Destination(
            protocol="MQTT5", sink=mosquitto.url, settings={"topicname": f"bridge/{topic}/a"}
        )

        async def arrived() -> bool:
            if sink.at("/hook"):
                return True
            await publisher.deliver(event, destination)
            return False

        try:
            # The source subscribes after start-up: publish until it consumed one copy (the
            # broker's de-duplication by source and id drops the repeats).
            await async_wait_until(arrived, 30, "the event at the HTTP sink", interval=0.5)
        finally:
            await publisher.aclose()
        [received] = await kafka.receive(1, within=30)
        assert received.event == as_strings(event)
        assert sink.at("/hook")[0].headers["ce-id"] == event["id"]
    finally:
        await kafka.close()
