"""NATS ``protocolsettings`` and sink checks (Subscriptions API 3.2.5.5), no IO.

Sink: ``nats://host[:4222][,host:port...]`` (``tls://`` for TLS). ``subject`` (required) is the
subject to publish to; it must not contain wildcards. ``contentmode`` is ``binary`` (default,
headers need NATS 2.2+) or ``structured``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ceprotocols.endpoint import checked_sink
from ceprotocols.errors import SettingsError
from ceprotocols.settings import SettingsReader

SCHEMES = {"nats": 4222, "tls": 4222}


@dataclass(frozen=True, slots=True)
class NatsSettings:
    """Validated NATS protocol settings."""

    subject: str
    structured: bool


def parse_settings(settings: Mapping[str, Any] | None) -> NatsSettings:
    """Validate NATS ``protocolsettings``; SettingsError names the bad member."""
    reader = SettingsReader(settings)
    subject = reader.string("subject", required=True) or ""
    tokens = subject.split(".")
    if any(not token or token in ("*", ">") or any(ch.isspace() for ch in token) for token in tokens):
        raise SettingsError("protocolsettings.subject", "must be a subject without wildcards or empty tokens")
    return NatsSettings(subject=subject, structured=reader.content_mode() == "structured")


def check(sink: str, settings: Mapping[str, Any]) -> NatsSettings:
    """Validate a sink and its settings; SettingsError names the bad member."""
    checked_sink(sink, schemes=SCHEMES)
    return parse_settings(settings)
