"""Ingress sources: a URL -> the receiver that consumes it.

==========  ===========================================================================
scheme      source URL
==========  ===========================================================================
mqtt(s)     ``mqtt://host:1883/devices/#?qos=1&version=5[&session=persistent&clientid=c]``
kafka(s)    ``kafka://host:9092[,host:port]/orders?group=cebroker&offset=earliest``
nats, tls   ``nats://host:4222/events.>`` (``?queue=g`` or ``?stream=S&durable=D``)
amqp(s)     ``amqp://host:5672/queue/in``
==========  ===========================================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import urlsplit

from ceprotocols.endpoint import EndpointError, parse_endpoint, redact
from ceprotocols.errors import SettingsError
from ceprotocols.receiver import Limits, Receiver
from ceprotocols.registry import MissingDependency

#: Scheme -> (module, class, extra, default port) of its receiver; the module is imported
#: only when a source uses it.
RECEIVERS: dict[str, tuple[str, str, str, int]] = {
    "mqtt": ("ceprotocols.mqtt.receiver", "MqttReceiver", "mqtt", 1883),
    "mqtts": ("ceprotocols.mqtt.receiver", "MqttReceiver", "mqtt", 8883),
    "kafka": ("ceprotocols.kafka.receiver", "KafkaReceiver", "kafka", 9092),
    "kafkas": ("ceprotocols.kafka.receiver", "KafkaReceiver", "kafka", 9093),
    "nats": ("ceprotocols.nats.receiver", "NatsReceiver", "nats", 4222),
    "tls": ("ceprotocols.nats.receiver", "NatsReceiver", "nats", 4222),
    "amqp": ("ceprotocols.amqp.receiver", "AmqpReceiver", "amqp", 5672),
    "amqps": ("ceprotocols.amqp.receiver", "AmqpReceiver", "amqp", 5671),
}


def create_receiver(url: str, limits: Limits | None = None) -> Receiver:
    """The receiver for a source URL, refusing messages over ``limits``. Raises SettingsError
    (field ``source``) for a URL that cannot be consumed and MissingDependency when the
    protocol's client library is missing. Messages name the URL without its credentials."""
    shown = redact(url)
    scheme = urlsplit(url).scheme.lower()
    if scheme not in RECEIVERS:
        raise SettingsError("source", f"{shown!r}: scheme must be one of {', '.join(sorted(RECEIVERS))}")
    module_name, class_name, extra, port = RECEIVERS[scheme]
    try:
        cls: Callable[..., Receiver] = getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        raise MissingDependency(f"source {shown}: pip install 'ceprotocols[{extra}]' ({exc})") from exc
    try:
        endpoint = parse_endpoint(url, schemes={scheme: port})
    except EndpointError as exc:
        raise SettingsError("source", str(exc).replace(repr(url), repr(shown))) from None
    return cls(url, endpoint, limits)
