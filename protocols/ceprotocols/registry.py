"""The protocol registry: subscription ``protocol`` name -> sender factory and settings check.

An explicit dict, no plugin discovery. Each factory imports its client library only when called,
so a missing optional dependency fails with the extra to install instead of at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ceprotocols.egress import NetworkPolicy, Resolver, system_resolver
from ceprotocols.errors import SettingsError
from ceprotocols.sender import Sender

#: Client library module -> the extra that installs it.
_EXTRAS = {"paho": "mqtt", "proton": "amqp", "confluent_kafka": "kafka", "nats": "nats"}


class MissingDependency(ImportError):
    """A protocol's client library is not installed."""


def _load(module: str, attribute: str) -> Any:
    try:
        return getattr(importlib.import_module(module), attribute)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in _EXTRAS:
            raise
        raise MissingDependency(
            f"{module} needs the {missing} package: pip install 'ceprotocols[{_EXTRAS[missing]}]'"
        ) from exc


class SenderFactory(Protocol):
    """Builds one protocol's sender, restricted to the destinations ``policy`` accepts.

    ``policy=None`` means :meth:`NetworkPolicy.unrestricted`; ``resolver`` resolves host names
    when the policy is restricted (tests inject one that maps names to any address).
    """

    def __call__(
        self, *, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver
    ) -> Sender: ...


def _factory(module: str, attribute: str, **fixed: Any) -> SenderFactory:
    def factory(*, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver) -> Sender:
        sender: Sender = _load(module, attribute)(policy=policy, resolver=resolver, **fixed)
        return sender

    return factory


#: Protocol name (case-sensitive, as in the Subscriptions API) -> factory of its sender.
SENDERS: dict[str, SenderFactory] = {
    "HTTP": _factory("ceprotocols.http", "HttpSender"),
    "MQTT3": _factory("ceprotocols.mqtt.sender", "MqttSender", v5=False),
    "MQTT5": _factory("ceprotocols.mqtt.sender", "MqttSender", v5=True),
    "AMQP": _factory("ceprotocols.amqp.sender", "AmqpSender"),
    "KAFKA": _factory("ceprotocols.kafka.sender", "KafkaSender"),
    "NATS": _factory("ceprotocols.nats.sender", "NatsSender"),
}


def create_sender(
    protocol: str, *, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver
) -> Sender:
    """A new sender for ``protocol`` that connects only where ``policy`` allows.

    Every connection the sender opens (sinks; for HTTP also token endpoints, the webhook
    handshake and dead-letter sinks, which go through the same sender) is checked on the address
    it connects to; a refused one fails the delivery with a final
    :class:`~ceprotocols.errors.DestinationRefused`. ``policy=None`` is
    :meth:`NetworkPolicy.unrestricted`, for tests and trusted embeddings: a broker passes its
    real policy. Raises KeyError for an unknown protocol and MissingDependency when its client
    library is not installed.
    """
    try:
        factory = SENDERS[protocol]
    except KeyError:
        raise KeyError(f"unknown protocol {protocol!r}; known: {', '.join(SENDERS)}") from None
    return factory(policy=policy, resolver=resolver)


def _settings_checks() -> dict[str, Callable[[str, Mapping[str, Any]], object]]:
    from ceprotocols.amqp.settings import check as amqp_check
    from ceprotocols.kafka.settings import check as kafka_check
    from ceprotocols.mqtt.settings import check as mqtt_check
    from ceprotocols.nats.settings import check as nats_check

    return {
        "MQTT3": lambda sink, s: mqtt_check(sink, s, v5=False),
        "MQTT5": lambda sink, s: mqtt_check(sink, s, v5=True),
        "AMQP": amqp_check,
        "KAFKA": kafka_check,
        "NATS": nats_check,
    }


def check_destination(protocol: str, sink: str, settings: Mapping[str, Any] | None) -> None:
    """Check a subscription's sink and ``protocolsettings`` for ``protocol`` without connecting
    (for the Subscriptions API to reject bad subscriptions at create time). Raises SettingsError
    naming the member (``sink``, ``protocolsettings.qos``...). HTTP and unknown protocols are
    not checked here."""
    check = _settings_checks().get(protocol)
    if check is not None:
        check(sink, settings or {})


__all__ = [
    "SENDERS",
    "MissingDependency",
    "SenderFactory",
    "SettingsError",
    "check_destination",
    "create_sender",
]
