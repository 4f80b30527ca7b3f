"""Ingress sources: a URL -> the receiver that consumes it.

==========  ===========================================================================
scheme      source URL
==========  ===========================================================================
mqtt(s)     ``mqtt://host:1883/devices/#?qos=1&version=5``
kafka(s)    ``kafka://host:9092[,host:port]/orders?group=cebroker&offset=earliest``
nats, tls   ``nats://host:4222/events.>`` (``?queue=g`` or ``?stream=S&durable=D``)
amqp(s)     ``amqp://host:5672/queue/in``
==========  ===========================================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import urlsplit

from ceprotocols.endpoint import EndpointError, parse_endpoint
from ceprotocols.errors import SettingsError
from ceprotocols.receiver import Receiver
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


def create_receiver(url: str) -> Receiver:
    """The receiver for a source URL. Raises SettingsError (field ``source``) for a URL that
    cannot be consumed and MissingDependency when the protocol's client library is missing."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in RECEIVERS:
        raise SettingsError("source", f"{url!r}: scheme must be one of {', '.join(sorted(RECEIVERS))}")
    module_name, class_name, extra, port = RECEIVERS[scheme]
    try:
        cls: Callable[..., Receiver] = getattr(importlib.import_module(module_name), class_name)
    except ImportError as exc:
        raise MissingDependency(f"source {url}: pip install 'ceprotocols[{extra}]' ({exc})") from exc
    try:
        endpoint = parse_endpoint(url, schemes={scheme: port})
    except EndpointError as exc:
        raise SettingsError("source", str(exc)) from exc
    return cls(url, endpoint)
