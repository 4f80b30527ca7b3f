"""AMQP ``protocolsettings`` and sink checks (Subscriptions API 3.2.5.3), no IO.

The link target is ``address``, or else the sink URI's path (``amqp://host/queue/orders`` ->
``/queue/orders``). ``sendersettlementmode`` is ``unsettled`` (default: a delivery completes on
the ``accepted`` outcome) or ``settled`` (pre-settled, at most once).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ceprotocols.endpoint import Endpoint, checked_sink
from ceprotocols.errors import SettingsError
from ceprotocols.settings import SettingsReader

SCHEMES = {"amqp": 5672, "amqps": 5671}
SETTLEMENT_MODES = ("unsettled", "settled")


@dataclass(frozen=True, slots=True)
class AmqpSettings:
    """Validated AMQP protocol settings."""

    address: str
    link_name: str | None
    settled: bool
    link_properties: tuple[tuple[str, str], ...]
    structured: bool


def parse_settings(settings: Mapping[str, Any] | None, endpoint: Endpoint) -> AmqpSettings:
    """Validate AMQP ``protocolsettings`` for a sink; SettingsError names the bad member."""
    reader = SettingsReader(settings)
    address = reader.string("address") or endpoint.path
    if not address or address == "/":
        raise SettingsError("protocolsettings.address", "is required when the sink URI has no path")
    return AmqpSettings(
        address=address,
        link_name=reader.string("linkname"),
        settled=reader.choice("sendersettlementmode", SETTLEMENT_MODES, default="unsettled") == "settled",
        link_properties=tuple(sorted(reader.string_map("linkproperties").items())),
        structured=reader.content_mode() == "structured",
    )


def check(sink: str, settings: Mapping[str, Any]) -> AmqpSettings:
    """Validate a sink and its settings; SettingsError names the bad member."""
    endpoint = checked_sink(sink, schemes=SCHEMES)
    return parse_settings(settings, endpoint)
