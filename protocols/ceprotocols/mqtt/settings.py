"""MQTT ``protocolsettings`` and sink checks (Subscriptions API 3.2.5.2), no IO."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ceprotocols.endpoint import checked_sink
from ceprotocols.errors import SettingsError
from ceprotocols.settings import SettingsReader

SCHEMES = {"mqtt": 1883, "mqtts": 8883, "tcp": 1883, "ssl": 8883, "ws": 80, "wss": 443}
#: Schemes that speak MQTT over WebSocket (the sink path is the WebSocket path, default ``/mqtt``).
WEBSOCKET_SCHEMES = frozenset({"ws", "wss"})


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """Validated MQTT protocol settings."""

    topic: str
    qos: int
    retain: bool
    expiry: int | None
    user_properties: tuple[tuple[str, str], ...]
    structured: bool


def parse_settings(settings: Mapping[str, Any] | None, *, v5: bool) -> MqttSettings:
    """Validate MQTT ``protocolsettings``; SettingsError names the bad member."""
    reader = SettingsReader(settings)
    topic = reader.string("topicname", required=True) or ""
    if any(ch in topic for ch in "+#"):
        raise SettingsError("protocolsettings.topicname", "must not contain the wildcards + or #")
    expiry = reader.integer("expiry")
    if expiry is not None and expiry < 0:
        raise SettingsError("protocolsettings.expiry", "must not be negative")
    mode = reader.content_mode(default="binary" if v5 else "structured")
    if not v5 and mode == "binary":
        raise SettingsError("protocolsettings.contentmode", "MQTT 3.1.1 supports structured mode only")
    if not v5 and (expiry is not None or reader.string_map("userproperties")):
        raise SettingsError("protocolsettings", "expiry and userproperties need MQTT 5")
    return MqttSettings(
        topic=topic,
        qos=reader.integer("qos", default=1, choices=(0, 1, 2)) or 0,
        retain=reader.boolean("retain"),
        expiry=expiry,
        user_properties=tuple(reader.string_map("userproperties").items()),
        structured=mode == "structured",
    )


def check(sink: str, settings: Mapping[str, Any], *, v5: bool) -> MqttSettings:
    """Validate a sink and its settings; SettingsError names the bad member."""
    checked_sink(sink, schemes=SCHEMES)
    return parse_settings(settings, v5=v5)
