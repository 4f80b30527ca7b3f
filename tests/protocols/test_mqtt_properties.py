"""MQTT 5 PUBLISH properties written by ``ceprotocols.mqtt.properties`` (MQTT 5.0 section 2.2.2).

The encoder replaces paho-mqtt's ``Properties`` on the delivery path, so its bytes are checked
against paho's own encoder and decoder, and a real mosquitto must hand them to a subscriber.
"""

from __future__ import annotations

import pytest
from ceprotocols.errors import BindingError, DeliveryRejected
from ceprotocols.mqtt import binding
from ceprotocols.mqtt.properties import encode, publish_properties
from ceprotocols.registry import create_sender
from ceprotocols.sender import Destination
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from servers import MosquittoServer

from protocols.ce_samples import as_strings, make_event
from protocols.consumers import MqttConsumer
from protocols.harness import connections, unique_name

MESSAGES = {
    "binary event": binding.to_binary(make_event("json-object")),
    "unicode and empty values": binding.MqttMessage(
        b"", "text/plain; charset=utf-8", (("k", ""), ("ä", "€" * 300))
    ),
    "user properties only": binding.MqttMessage(b"x", None, (("a", "1"), ("a", "2"))),
    "content type only": binding.MqttMessage(b"x", "application/cloudevents+json", ()),
}


def paho_pack(message: binding.MqttMessage, expiry: int | None) -> bytes:
    properties = Properties(PacketTypes.PUBLISH)
    if expiry is not None:
        properties.MessageExpiryInterval = expiry
    if message.content_type is not None:
        properties.ContentType = message.content_type
    if message.user_properties:
        properties.UserProperty = list(message.user_properties)
    packed: bytes = properties.pack()
    return packed


@pytest.mark.parametrize("expiry", [None, 0, 60, 0xFFFFFFFF])
@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_encoding_matches_paho(name: str, expiry: int | None) -> None:
    """Same bytes as paho's encoder (identifiers 0x02, 0x03, 0x26; UTF-8 strings with a two-byte
    length, section 1.5.4; string pairs, 1.5.7; the variable byte integer length, 1.5.5), and
    paho's decoder reads back every property, user properties in order."""
    message = MESSAGES[name]
    packed = encode(message, expiry)
    assert packed == paho_pack(message, expiry)
    decoded = Properties(PacketTypes.PUBLISH)
    decoded.unpack(packed)
    assert getattr(decoded, "ContentType", None) == message.content_type
    assert [tuple(p) for p in getattr(decoded, "UserProperty", [])] == list(message.user_properties)
    assert getattr(decoded, "MessageExpiryInterval", None) == expiry


def test_long_property_section_uses_a_multi_byte_length() -> None:
    """A property section of 128 bytes or more has a two-byte variable byte integer length."""
    message = binding.MqttMessage(b"", None, (("n", "v" * 200),))
    packed = encode(message, None)
    assert packed[0] & 0x80
    assert not packed[1] & 0x80
    assert packed == paho_pack(message, None)


def test_no_properties_is_none() -> None:
    """Nothing to send gives paho no properties object (an empty property section)."""
    assert publish_properties(binding.MqttMessage(b"x", None, ()), None) is None


@pytest.mark.parametrize(
    ("message", "expiry", "match"),
    [
        (binding.MqttMessage(b"", "t" * 70_000, ()), None, "longer than 65535"),
        (binding.MqttMessage(b"", None, (("k", "v" * 70_000),)), None, "longer than 65535"),
        (binding.MqttMessage(b"", None, ()), 1 << 32, "expiry"),
        (binding.MqttMessage(b"", None, ()), -1, "expiry"),
    ],
)
def test_values_mqtt_cannot_carry_are_binding_errors(
    message: binding.MqttMessage, expiry: int, match: str
) -> None:
    """UTF-8 strings are limited to 65535 bytes and the expiry interval to four bytes."""
    with pytest.raises(BindingError, match=match):
        encode(message, expiry)


@pytest.mark.mqtt
async def test_oversized_user_property_is_a_final_rejection(mosquitto: MosquittoServer) -> None:
    """A user property MQTT cannot encode fails the delivery for good, naming the reason, and
    leaves the connection usable."""
    sender = create_sender("MQTT5")
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=True).ready()
    try:
        settings = {"topicname": name, "qos": 1, "userproperties": {"big": "v" * 70_000}}
        oversized = Destination(protocol="MQTT5", sink=mosquitto.url, settings=settings)
        with pytest.raises(DeliveryRejected, match="longer than 65535") as caught:
            await sender.deliver(make_event(), oversized)
        assert not caught.value.retryable
        event = make_event()
        plain = Destination(protocol="MQTT5", sink=mosquitto.url, settings={"topicname": name, "qos": 1})
        await sender.deliver(event, plain)
        [received] = await consumer.receive(1)
        assert received.event == as_strings(event)
        assert connections(sender) == 1
    finally:
        await sender.aclose()
        await consumer.close()


@pytest.mark.mqtt
async def test_properties_reach_a_subscriber(mosquitto: MosquittoServer) -> None:
    """Through a real mosquitto: content type, attribute and extra user properties (in order,
    after the attributes) and the message expiry interval arrive at the subscriber."""
    sender = create_sender("MQTT5")
    name = unique_name()
    consumer = await MqttConsumer(mosquitto.host, mosquitto.port, name, v5=True).ready()
    try:
        event = make_event("text")
        settings = {"topicname": name, "qos": 1, "expiry": 3600, "userproperties": {"tenant": "ä-1"}}
        await sender.deliver(event, Destination(protocol="MQTT5", sink=mosquitto.url, settings=settings))
        [received] = await consumer.receive(1)
        # The decoder reads a user property with a valid attribute name as an attribute.
        assert received.event == {**as_strings(event), "tenant": "ä-1"}
        properties = received.raw.properties
        assert properties.ContentType == event["datacontenttype"]
        assert properties.UserProperty[-1] == ("tenant", "ä-1")
        assert ("id", event["id"]) in properties.UserProperty
        assert 3590 <= properties.MessageExpiryInterval <= 3600
    finally:
        await sender.aclose()
        await consumer.close()
