"""Transformations delivered over every protocol to its real server, in each content mode:
reshaped data, a renamed and an added attribute, what the binding sends besides the event (the
Kafka key, an MQTT topic suffix, a NATS subject suffix, an HTTP path), and a drop."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.broker import Broker

from protocols.consumers import Consumer, HttpConsumer
from protocols.harness import ProtocolCase, protocol_params, unique_name

STRUCTURED = {"content-type": "application/cloudevents+json"}

#: What each protocol's transformation adds besides the event, and where it then arrives.
EXTRAS = {
    "HTTP": '{"path": "/orders"}',
    "KAFKA": '{"key": "order-" + string(event.data.order)}',
    "MQTT3": '{"topic": "orders"}',
    "MQTT5": '{"topic": "orders"}',
    "NATS": '{"subject": "orders"}',
    "AMQP": "{}",
}


def expression(protocol: str) -> str:
    """Drops order 0; keeps two fields of the data, renames ``subject`` to ``orderref``, adds
    ``channel``, changes the type (``time`` is kept: AMQP's binary mode would add one)."""
    return (
        "event.data.order == 0 ? null : "
        '{"type": "com.partner.order", "source": event.source, "orderref": event.subject,'
        ' "channel": "partner", "time": event.time, "datacontenttype": "application/json",'
        ' "data": {"order": event.data.order, "amount": event.data.amount},'
        f' "$delivery": {EXTRAS[protocol]}}}'
    )


def order(n: int, name: str) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": "/shop",
        "type": "com.example.order",
        "subject": name,
        "time": "2024-05-01T12:30:00.123Z",
        "datacontenttype": "application/json",
        "data": {"order": n, "amount": 10 * n, "internal": "secret"},
    }


async def consumer_for(case: ProtocolCase, server: Any, name: str) -> Consumer:
    """A consumer where the transformed deliveries arrive (suffixes applied)."""
    if case.protocol == "HTTP":
        return await HttpConsumer(server, f"/{name}/orders").start()
    suffixed = {"MQTT3": f"{name}/orders", "MQTT5": f"{name}/orders", "NATS": f"{name}.orders"}
    return await case.consumer(server, suffixed.get(case.protocol, name))


@pytest.mark.parametrize(("case", "mode"), protocol_params(modes=True, http=True))
async def test_a_transformed_delivery_reaches_the_protocol(
    case: ProtocolCase,
    mode: str,
    server_of: Callable[[ProtocolCase], Any],
    make_broker: Callable[..., Broker],
) -> None:
    server = server_of(case)
    name = unique_name()
    consumer = await consumer_for(case, server, name)
    broker = make_broker()
    try:
        async with httpx.AsyncClient(base_url=broker.url, timeout=30) as http:
            subscription = {
                "protocol": case.protocol,
                "sink": case.sink(server, name),
                "protocolsettings": case.settings(name, mode),
                "filters": [{"exact": {"subject": name}}],
                # One at a time, in order: the dropped order 0 goes first, so had it been sent
                # it would arrive before order 1.
                "config": {"transform": {"cel": expression(case.protocol)}, "concurrency": "1"},
            }
            response = await http.post("/subscriptions", json=subscription)
            assert response.status_code == 201, response.text
            dropped, kept = order(0, name), order(1, name)
            for sent in (dropped, kept):
                response = await http.post("/events", json=sent, headers=STRUCTURED)
                assert response.status_code == 202, response.text
        [received] = await consumer.receive(1, within=30)
        expected = {
            "specversion": "1.0",
            "id": kept["id"],
            "type": "com.partner.order",
            "source": "/shop",
            "orderref": name,
            "channel": "partner",
            "time": "2024-05-01T12:30:00.123Z",
            "datacontenttype": "application/json",
            "data": {"order": 1, "amount": 10},
        }
        if case.protocol == "KAFKA":
            expected["partitionkey"] = "order-1"
            assert received.raw.key == b"order-1"
        assert received.event == expected
    finally:
        await consumer.close()
