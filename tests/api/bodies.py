"""Request bodies and helpers shared by the API tests."""

from __future__ import annotations

from typing import Any

import httpx


def http_sub(**extra: Any) -> dict[str, Any]:
    """A minimal valid HTTP subscription request."""
    return {"protocol": "HTTP", "sink": "https://sink.example/events", **extra}


#: A minimal valid request per protocol.
VALID: dict[str, dict[str, Any]] = {
    "HTTP": http_sub(),
    "MQTT3": {"protocol": "MQTT3", "sink": "mqtt://127.0.0.1:1883", "protocolsettings": {"topicname": "t/1"}},
    "MQTT5": {"protocol": "MQTT5", "sink": "mqtts://broker:8883", "protocolsettings": {"topicname": "t/1"}},
    "AMQP": {"protocol": "AMQP", "sink": "amqp://127.0.0.1:5672/queue/q1"},
    "KAFKA": {
        "protocol": "KAFKA",
        "sink": "kafka://k1:9092,k2:9092",
        "protocolsettings": {"topicname": "ev"},
    },
    "NATS": {"protocol": "NATS", "sink": "nats://127.0.0.1:4222", "protocolsettings": {"subject": "ev.x"}},
}


async def create(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """POST a subscription that must be accepted; returns the realized subscription."""
    r = await client.post("/subscriptions", json=body)
    assert r.status_code == 201, r.text
    doc: dict[str, Any] = r.json()
    return doc
