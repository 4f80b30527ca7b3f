"""The protocol registry: subscription ``protocol`` name -> sender factory and settings check.

An explicit dict, no plugin discovery. Each factory imports its client library only when called,
so a missing optional dependency fails with the extra to install instead of at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

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


def _http() -> Sender:
    sender: Sender = _load("ceprotocols.http", "HttpSender")()
    return sender


def _mqtt(v5: bool) -> Callable[[], Sender]:
    def factory() -> Sender:
        sender: Sender = _load("ceprotocols.mqtt.sender", "MqttSender")(v5=v5)
        return sender

    return factory


def _amqp() -> Sender:
    sender: Sender = _load("ceprotocols.amqp.sender", "AmqpSender")()
    return sender


def _kafka() -> Sender:
    sender: Sender = _load("ceprotocols.kafka.sender", "KafkaSender")()
    return sender


def _nats() -> Sender:
    sender: Sender = _load("ceprotocols.nats.sender", "NatsSender")()
    return sender


#: Protocol name (case-sensitive, as in the Subscriptions API) -> factory of its sender.
SENDERS: dict[str, Callable[[], Sender]] = {
    "HTTP": _http,
    "MQTT3": _mqtt(v5=False),
    "MQTT5": _mqtt(v5=True),
    "AMQP": _amqp,
    "KAFKA": _kafka,
    "NATS": _nats,
}


def create_sender(protocol: str) -> Sender:
    """A new sender for ``protocol``. Raises KeyError for an unknown protocol and
    MissingDependency when its client library is not installed."""
    try:
        factory = SENDERS[protocol]
    except KeyError:
        raise KeyError(f"unknown protocol {protocol!r}; known: {', '.join(SENDERS)}") from None
    return factory()


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


__all__ = ["SENDERS", "MissingDependency", "SettingsError", "check_destination", "create_sender"]
