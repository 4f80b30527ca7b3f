"""The protocol registry: explicit names, and a clear message when a client library is missing
(the ``ceprotocols[...]`` extra to install)."""

from __future__ import annotations

import sys

import pytest
from ceprotocols.registry import SENDERS, MissingDependency, create_sender
from ceprotocols.sources import create_receiver


def test_registry_names_are_the_subscription_protocols() -> None:
    """The Subscriptions API's protocol names, case-sensitive (spec 3.2.4)."""
    assert set(SENDERS) == {"HTTP", "MQTT3", "MQTT5", "AMQP", "KAFKA", "NATS"}
    with pytest.raises(KeyError):
        create_sender("mqtt5")


@pytest.mark.parametrize(
    ("protocol", "library", "modules", "extra"),
    [
        ("MQTT5", "paho.mqtt.client", ["ceprotocols.mqtt.sender", "ceprotocols.mqtt.connection"], "mqtt"),
        ("KAFKA", "confluent_kafka", ["ceprotocols.kafka.sender", "ceprotocols.kafka.producer"], "kafka"),
        (
            "NATS",
            "nats",
            ["ceprotocols.nats.sender", "ceprotocols.nats.client", "ceprotocols.nats.flusher"],
            "nats",
        ),
        (
            "AMQP",
            "proton",
            [
                "ceprotocols.amqp.sender",
                "ceprotocols.amqp.connection",
                "ceprotocols.amqp.engine",
                "ceprotocols.amqp.deliveries",
            ],
            "amqp",
        ),
    ],
)
def test_missing_client_library_names_the_extra(
    protocol: str, library: str, modules: list[str], extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the client library, creating the sender says which extra to install."""
    for module in modules:
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, library, None)  # makes "import <library>" fail
    with pytest.raises(MissingDependency, match=rf"ceprotocols\[{extra}\]"):
        create_sender(protocol)


def test_missing_client_library_for_a_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for an ingress source."""
    monkeypatch.delitem(sys.modules, "ceprotocols.nats.receiver", raising=False)
    monkeypatch.delitem(sys.modules, "ceprotocols.nats.client", raising=False)
    monkeypatch.setitem(sys.modules, "nats", None)
    with pytest.raises(MissingDependency, match=r"ceprotocols\[nats\]"):
        create_receiver("nats://127.0.0.1:4222/events.>")
