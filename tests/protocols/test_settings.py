"""Sink URLs, protocol settings and their checks, without IO (Subscriptions API 3.2.5)."""

from __future__ import annotations

from typing import Any

import pytest
from ceprotocols.endpoint import EndpointError, parse_endpoint
from ceprotocols.errors import SettingsError
from ceprotocols.registry import check_destination


def test_endpoint_forms() -> None:
    """Comma lists of hosts, IPv6, default ports, credentials in the authority, ``#`` kept."""
    kafka = parse_endpoint("kafka://a:1,b/orders?group=g", schemes={"kafka": 9092})
    assert kafka.hosts == (("a", 1), ("b", 9092))
    assert kafka.path == "/orders"
    assert kafka.option("group") == "g"
    mqtt = parse_endpoint("mqtts://u:p%40ss@[::1]/devices/#", schemes={"mqtts": 8883})
    assert (mqtt.host, mqtt.port, mqtt.path, mqtt.tls) == ("::1", 8883, "/devices/#", True)
    assert (mqtt.username, mqtt.password) == ("u", "p@ss")


@pytest.mark.parametrize("url", ["http://h:1", "mqtt://", "mqtt://h:port", "mqtt://h:70000"])
def test_bad_endpoints(url: str) -> None:
    """Wrong scheme, no host, non-numeric or out-of-range port: a clear EndpointError."""
    with pytest.raises(EndpointError):
        parse_endpoint(url, schemes={"mqtt": 1883})


@pytest.mark.parametrize(
    ("protocol", "sink", "settings"),
    [
        (
            "MQTT5",
            "mqtt://h",
            {"topicname": "a/b", "qos": 2, "retain": True, "expiry": 60, "userproperties": {"k": "v"}},
        ),
        ("MQTT3", "mqtt://h", {"topicname": "a/b", "contentmode": "structured"}),
        ("AMQP", "amqp://h/queue/x", {}),
        ("AMQP", "amqp://h", {"address": "/queue/x", "linkName": "l", "sendersettlementmode": "settled"}),
        (
            "KAFKA",
            "kafka://h:9092,g:9093",
            {"topicname": "t", "acks": -1, "partitionkeyextractor": "subject"},
        ),
        ("KAFKA", "kafka://h/t", {"acks": "1"}),
        ("NATS", "nats://h", {"subject": "a.b", "contentmode": "structured"}),
    ],
)
def test_valid_destinations(protocol: str, sink: str, settings: dict[str, Any]) -> None:
    """The spec's settings (and the OpenAPI spelling ``linkName``) are accepted."""
    check_destination(protocol, sink, settings)


@pytest.mark.parametrize(
    ("protocol", "sink", "settings", "field"),
    [
        ("MQTT5", "mqtt://h", {}, "protocolsettings.topicname"),
        ("MQTT5", "mqtt://h", {"topicname": "a/#"}, "protocolsettings.topicname"),
        ("MQTT5", "mqtt://h", {"topicname": "a", "qos": 3}, "protocolsettings.qos"),
        ("MQTT5", "mqtt://h", {"topicname": "a", "retain": "yes"}, "protocolsettings.retain"),
        ("MQTT3", "mqtt://h", {"topicname": "a", "contentmode": "binary"}, "protocolsettings.contentmode"),
        ("MQTT3", "mqtt://h", {"topicname": "a", "expiry": 5}, "protocolsettings"),
        ("MQTT5", "amqp://h", {"topicname": "a"}, "sink"),
        ("AMQP", "amqp://h", {}, "protocolsettings.address"),
        ("AMQP", "amqp://h/q", {"sendersettlementmode": "maybe"}, "protocolsettings.sendersettlementmode"),
        ("AMQP", "amqp://h/q", {"linkproperties": {"a": 1}}, "protocolsettings.linkproperties"),
        ("KAFKA", "kafka://h", {}, "protocolsettings.topicname"),
        ("KAFKA", "kafka://h", {"topicname": "bad topic"}, "protocolsettings.topicname"),
        ("KAFKA", "kafka://h", {"topicname": "t", "acks": "2"}, "protocolsettings.acks"),
        (
            "KAFKA",
            "kafka://h",
            {"topicname": "t", "partitionkeyextractor": "$.x"},
            "protocolsettings.partitionkeyextractor",
        ),
        ("NATS", "nats://h", {"subject": "a.>"}, "protocolsettings.subject"),
        ("NATS", "nats://h", {"subject": "a..b"}, "protocolsettings.subject"),
        ("NATS", "nats://h", {"subject": "a", "contentmode": "batch"}, "protocolsettings.contentmode"),
    ],
)
def test_invalid_destinations_name_the_member(
    protocol: str, sink: str, settings: dict[str, Any], field: str
) -> None:
    """Every unusable sink or setting raises SettingsError naming the member."""
    with pytest.raises(SettingsError) as caught:
        check_destination(protocol, sink, settings)
    assert caught.value.field == field
