"""How stores persist a :class:`Subscription`: a JSON document plus an opaque page cursor.

The stored document is the realized subscription *with* its secrets (delivery needs them);
only the API layer strips them. The revision lives beside the document, not inside it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from cebroker.store.base import InvalidCursor, Subscription

_CURSOR_PREFIX = "seq:"


def dump_subscription(subscription: Subscription) -> str:
    """The stored JSON text of ``subscription``, secrets included."""
    return json.dumps(subscription.to_json(include_secrets=True), ensure_ascii=False)


def load_subscription(text: str, revision: int) -> Subscription:
    """Rebuild a subscription from :func:`dump_subscription` output and its stored revision."""
    doc: dict[str, Any] = json.loads(text)
    return subscription_from_json(doc, revision=revision)


def subscription_from_json(doc: Mapping[str, Any], *, revision: int = 1) -> Subscription:
    """Build a :class:`Subscription` from its JSON form (as produced by ``to_json``).

    The document is trusted: it was validated before it was stored.
    """
    types = doc.get("types")
    credential = doc.get("sinkcredential")
    return Subscription(
        id=doc["id"],
        protocol=doc["protocol"],
        sink=doc["sink"],
        source=doc.get("source"),
        types=tuple(types) if types is not None else None,
        config=dict(doc.get("config", {})),
        filters=tuple(dict(f) for f in doc.get("filters", ())),
        protocolsettings=dict(doc.get("protocolsettings", {})),
        sinkcredential=dict(credential) if credential is not None else None,
        revision=revision,
    )


def encode_cursor(seq: int) -> str:
    """An opaque cursor that resumes a listing after creation sequence ``seq``."""
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{seq}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    """The creation sequence a cursor from :func:`encode_cursor` resumes after.

    Raises:
        InvalidCursor: the text is not a cursor this module produced.
    """
    padded = cursor + "=" * (-len(cursor) % 4)
    try:
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError) as exc:
        raise InvalidCursor("not a cursor returned by this broker") from exc
    digits = text.removeprefix(_CURSOR_PREFIX)
    if not text.startswith(_CURSOR_PREFIX) or not digits.isascii() or not digits.isdigit():
        raise InvalidCursor("not a cursor returned by this broker")
    seq = int(digits)
    if seq > 2**63 - 1:  # beyond SQLite's INTEGER range: cannot have been issued
        raise InvalidCursor("not a cursor returned by this broker")
    return seq
