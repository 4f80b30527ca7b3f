"""Kafka ``protocolsettings`` and sink checks (Subscriptions API 3.2.5.4), no IO.

Sink: ``kafka://host:port[,host:port...][/topic]`` (``kafkas://`` for TLS). ``topicname`` (or the
sink path) names the topic. ``partitionkeyextractor`` names the context attribute whose value is
the record key (default ``partitionkey``, as the Kafka binding's key mapping suggests; the spec
leaves the expression language open, so this implementation takes an attribute name).
``clientid`` is the producer's ``client.id``; ``acks`` is ``0``, ``1`` or ``all`` (default ``all``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ceprotocols.endpoint import Endpoint, checked_sink
from ceprotocols.errors import SettingsError
from ceprotocols.eventform import ATTRIBUTE_NAME
from ceprotocols.settings import SettingsReader

SCHEMES = {"kafka": 9092, "kafkas": 9093}
ACKS = ("0", "1", "all", "-1")


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """Validated Kafka protocol settings."""

    topic: str
    key_attribute: str
    client_id: str | None
    acks: str
    structured: bool


def parse_settings(settings: Mapping[str, Any] | None, endpoint: Endpoint) -> KafkaSettings:
    """Validate Kafka ``protocolsettings`` for a sink; SettingsError names the bad member."""
    reader = SettingsReader(settings)
    topic = reader.string("topicname") or endpoint.path.strip("/")
    if not topic:
        raise SettingsError("protocolsettings.topicname", "is required when the sink URI has no path")
    if len(topic) > 249 or not all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in topic):
        raise SettingsError(
            "protocolsettings.topicname", "must be 1-249 ASCII letters, digits, '.', '_' or '-'"
        )
    key_attribute = reader.string("partitionkeyextractor") or "partitionkey"
    if not ATTRIBUTE_NAME.match(key_attribute):
        raise SettingsError("protocolsettings.partitionkeyextractor", "must name a context attribute")
    raw_acks = reader.raw("acks")
    acks_text = "all" if raw_acks is None else str(raw_acks).lower()
    if isinstance(raw_acks, bool) or not isinstance(raw_acks, str | int | None) or acks_text not in ACKS:
        raise SettingsError("protocolsettings.acks", "must be 0, 1 or all")
    return KafkaSettings(
        topic=topic,
        key_attribute=key_attribute,
        client_id=reader.string("clientid"),
        acks="all" if acks_text in ("all", "-1") else acks_text,
        structured=reader.content_mode() == "structured",
    )


def check(sink: str, settings: Mapping[str, Any]) -> KafkaSettings:
    """Validate a sink and its settings; SettingsError names the bad member."""
    endpoint = checked_sink(sink, schemes=SCHEMES)
    return parse_settings(settings, endpoint)
