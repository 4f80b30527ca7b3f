"""Signed HTTP deliveries as the Standard Webhooks specification defines them. Pure: no IO.

A subscription may hold a webhook secret, ``whsec_`` followed by the base64 of 24 to 64 random
bytes. Each signed delivery then carries three headers:

- ``webhook-id``: the message's identity, the same on every attempt of one delivery (receivers
  deduplicate on it);
- ``webhook-timestamp``: the attempt's time in whole seconds since the epoch;
- ``webhook-signature``: ``v1,`` and the base64 of HMAC-SHA256 over ``{id}.{timestamp}.{body}``
  with the secret's bytes as the key, ``body`` being the exact bytes sent. During a rotation
  there is one such entry per secret, separated by spaces, so a receiver that knows either
  secret accepts the delivery.

The id is derived from the subscription and the event's ``source`` and ``id``
(:func:`webhook_id`): stable across retries, restarts and redrives of one delivery, different for
every subscription, and the same when the same CloudEvent (same source and id) reaches the same
subscription again, which is what a receiver's deduplication wants.

Secrets never appear in reprs or messages: :class:`WebhookSecret` shows ``<redacted>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ceprotocols.errors import SettingsError

__all__ = [
    "MAX_SECRET_BYTES",
    "MIN_SECRET_BYTES",
    "SECRET_PREFIX",
    "SIGNATURE_HEADERS",
    "WebhookSecret",
    "WebhookSigning",
    "generate_webhook_secret",
    "parse_webhook_secret",
    "signature",
    "signed_headers",
    "webhook_id",
]

SECRET_PREFIX: Final = "whsec_"
MIN_SECRET_BYTES: Final = 24
MAX_SECRET_BYTES: Final = 64
#: The headers a signed delivery carries (lower case); the sender replaces any of these a
#: subscription's own ``headers`` setting names.
SIGNATURE_HEADERS: Final = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})
_FIELD: Final = "protocolsettings.webhooksecret"


@dataclass(frozen=True, slots=True)
class WebhookSecret:
    """The key of a webhook secret (the bytes its base64 encodes). Build with
    :func:`parse_webhook_secret`; its repr never shows the key."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not MIN_SECRET_BYTES <= len(self.key) <= MAX_SECRET_BYTES:
            raise SettingsError(
                _FIELD, f"a webhook secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"
            )

    def __repr__(self) -> str:
        return "WebhookSecret(<redacted>)"


@dataclass(frozen=True, slots=True)
class WebhookSigning:
    """What an HTTP destination needs to sign its deliveries.

    Attributes:
        subscription: the subscription's identity; part of every ``webhook-id``.
        secrets: the current secret first, then any previous one still honoured during a
            rotation; every delivery is signed with each.
    """

    subscription: str
    secrets: tuple[WebhookSecret, ...]

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("WebhookSigning needs at least one secret")


def parse_webhook_secret(text: str) -> WebhookSecret:
    """Validate ``whsec_`` + base64 of 24 to 64 bytes.

    Raises:
        SettingsError: on ``protocolsettings.webhooksecret``, saying what is wrong without
            repeating the value.
    """
    if not isinstance(text, str) or not text.startswith(SECRET_PREFIX):
        raise SettingsError(_FIELD, f"a webhook secret starts with {SECRET_PREFIX!r}")
    encoded = text[len(SECRET_PREFIX) :]
    encoded += "=" * (-len(encoded) % 4)  # padding may be left out, as some issuers do
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise SettingsError(_FIELD, f"after {SECRET_PREFIX!r} a webhook secret is standard base64") from None
    return WebhookSecret(key)


def generate_webhook_secret(size: int = 32) -> str:
    """A new secret in its text form, from ``size`` bytes of the ``secrets`` module."""
    if not MIN_SECRET_BYTES <= size <= MAX_SECRET_BYTES:
        raise ValueError(f"size must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes")
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(size)).decode("ascii")


def signed_batch_headers(
    signing: WebhookSigning, events: Sequence[Mapping[str, Any]], body: bytes, timestamp: int
) -> dict[str, str]:
    """The three headers of one signed attempt sending a batch of ``events``; its message id
    covers every event's source and id, so a retried batch keeps it."""
    material = "\x00".join(f"{e.get('source', '')}\x00{e.get('id', '')}" for e in events)
    message_id = webhook_id(signing.subscription, {"source": "batch", "id": material})
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(signing.secrets, message_id, timestamp, body),
    }


def webhook_id(subscription: str, event: Mapping[str, Any]) -> str:
    """``msg_`` and 128 bits of SHA-256 over the subscription and the event's source and id."""
    material = "\x00".join((subscription, str(event.get("source", "")), str(event.get("id", ""))))
    return "msg_" + hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def signature(secrets: tuple[WebhookSecret, ...], message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64>`` per secret, space-separated."""
    content = b"%s.%d.%s" % (message_id.encode("utf-8"), timestamp, body)
    return " ".join(
        "v1," + base64.b64encode(hmac.new(secret.key, content, hashlib.sha256).digest()).decode("ascii")
        for secret in secrets
    )


def signed_headers(
    signing: WebhookSigning, event: Mapping[str, Any], body: bytes, timestamp: int
) -> dict[str, str]:
    """The three headers of one signed attempt sending ``body`` at ``timestamp`` (seconds)."""
    message_id = webhook_id(signing.subscription, event)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(signing.secrets, message_id, timestamp, body),
    }
