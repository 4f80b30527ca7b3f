"""Round trips through every pure binding, both content modes, every payload kind.

Structured mode must return the event exactly. Binary mode returns attribute values as their
canonical strings where the protocol's metadata is text (Kafka headers, MQTT 5 user properties,
NATS headers: Core spec 3.1.1 "canonical string"), and native types where AMQP keeps them
(AMQP binding 3.1.4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ceprotocols.amqp import binding as amqp
from ceprotocols.kafka import binding as kafka
from ceprotocols.mqtt import binding as mqtt
from ceprotocols.nats import binding as nats

from protocols.ce_samples import PAYLOADS, as_strings, make_event

Codec = Callable[[dict[str, Any]], dict[str, Any]]

STRUCTURED: dict[str, Codec] = {
    "mqtt3": lambda e: mqtt.from_message(mqtt.to_structured(e, v5=False)),
    "mqtt5": lambda e: mqtt.from_message(mqtt.to_structured(e)),
    "amqp": lambda e: amqp.from_message(amqp.to_structured(e)),
    "kafka": lambda e: kafka.from_message(kafka.to_structured(e)),
    "nats": lambda e: nats.from_message(nats.to_structured(e)),
}

BINARY_TEXT: dict[str, Codec] = {
    "mqtt5": lambda e: mqtt.from_message(mqtt.to_binary(e)),
    "kafka": lambda e: kafka.from_message(kafka.to_binary(e)),
    "nats": lambda e: nats.from_message(nats.to_binary(e)),
}


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("binding", sorted(STRUCTURED))
def test_structured_round_trip_is_exact(binding: str, payload: str) -> None:
    """Structured mode carries the JSON event format unchanged (each binding's section 3.x
    "Structured Content Mode")."""
    event = make_event(payload)
    assert STRUCTURED[binding](event) == event


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("binding", sorted(BINARY_TEXT))
def test_binary_round_trip_keeps_canonical_strings(binding: str, payload: str) -> None:
    """Binary mode: attributes in text metadata come back as their canonical strings, the
    payload bytes and datacontenttype unchanged."""
    event = make_event(payload)
    assert BINARY_TEXT[binding](event) == as_strings(event)


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_amqp_binary_round_trip_keeps_native_types(payload: str) -> None:
    """AMQP binary mode keeps Boolean and Integer attributes as native AMQP values (3.1.4)."""
    event = make_event(payload)
    assert amqp.from_message(amqp.to_binary(event)) == event


def test_structured_payload_is_the_json_format() -> None:
    """A structured body is one JSON object with data_base64 for binary data (JSON format 3.1)."""
    event = make_event("binary")
    body = kafka.to_structured(event).value
    assert body is not None
    assert b'"data_base64"' in body
    assert dict(kafka.to_structured(event).headers)["content-type"].startswith(
        b"application/cloudevents+json"
    )
