"""``$delivery``: what a transformation may set besides the event, per protocol.

The output's reserved top-level member ``"$delivery"`` (never sent as an attribute: ``$`` cannot
start an attribute name) may hold:

* HTTP: ``headers`` (extra request headers, a map of strings) and ``path`` (a suffix for the
  sink URL's path, with an optional ``?query``);
* Kafka: ``key`` (the record key, carried as the subscription's key attribute,
  ``partitionkey`` unless ``partitionkeyextractor`` names another);
* MQTT: ``topic`` (levels appended to the subscription's topic);
* NATS: ``subject`` (tokens appended to the subscription's subject).

A member the subscription's protocol does not take is an error, as is a header the broker owns
(:data:`RESERVED_HEADERS`, every ``ce-`` header) and a path that could leave the sink's origin.
Errors are :class:`ExtrasError` with the JSON Pointer of the member.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ceprotocols.sender import Destination

#: Extra HTTP headers one delivery may carry, and the longest value of one.
MAX_HEADERS: Final = 16
MAX_HEADER_VALUE: Final = 1024
#: Longest path suffix, Kafka key, topic suffix or subject suffix.
MAX_SUFFIX: Final = 1024

#: Headers the broker or the HTTP stack sets: a transformation cannot set or override them
#: (credentials, the webhook signature and handshake, the message framing).
RESERVED_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "expect",
        "keep-alive",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "webhook-request-origin",
        "webhook-request-callback",
        "webhook-request-rate",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
    }
)

_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
_PATH = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*$")
_NATS_TOKEN = re.compile(r"^[A-Za-z0-9_\-]+$")

#: The members each protocol takes.
MEMBERS: Final = {
    "HTTP": ("headers", "path"),
    "KAFKA": ("key",),
    "MQTT3": ("topic",),
    "MQTT5": ("topic",),
    "AMQP": (),
    "NATS": ("subject",),
    "PULL": (),  # a consumer receives the event alone
}
_ALL = ("headers", "path", "key", "topic", "subject")


class ExtrasError(ValueError):
    """A ``$delivery`` member that cannot be used; ``pointer`` names it."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer}: {message}")
        self.pointer = pointer
        self.message = message


@dataclass(frozen=True, slots=True)
class Extras:
    """The validated ``$delivery`` of one output (all empty when there was none)."""

    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    path: str | None = None
    key: str | None = None
    topic: str | None = None
    subject: str | None = None

    @property
    def empty(self) -> bool:
        """Nothing to add to the subscription's destination."""
        return not self.headers and self.path is None and self.topic is None and self.subject is None

    def to_json(self) -> dict[str, Any]:
        """The members that are set, as the preview shows them."""
        doc: dict[str, Any] = {}
        if self.headers:
            doc["headers"] = dict(self.headers)
        for name in ("path", "key", "topic", "subject"):
            value = getattr(self, name)
            if value is not None:
                doc[name] = value
        return doc


NO_EXTRAS: Final = Extras()


def parse_extras(value: Any, protocol: str, *, batch: bool) -> Extras:
    """Validate a ``$delivery`` value for a subscription of ``protocol`` (``batch``: its
    deliveries go out in batches, which carry no per-event headers or path)."""
    if value is None:
        return NO_EXTRAS
    if not isinstance(value, dict):
        raise ExtrasError("/$delivery", "must be a map")
    allowed = MEMBERS.get(protocol, ())
    for name in value:
        if name not in _ALL:
            raise ExtrasError(f"/$delivery/{name}", f"unknown member; expected one of {', '.join(_ALL)}")
        if name not in allowed:
            raise ExtrasError(f"/$delivery/{name}", f"is not taken by {protocol} subscriptions")
        if batch:
            raise ExtrasError(f"/$delivery/{name}", "a batch carries no per-event headers or path")
    return Extras(
        headers=_headers(value.get("headers")),
        path=_path(value.get("path")),
        key=_text(value.get("key"), "/$delivery/key"),
        topic=_topic(value.get("topic")),
        subject=_subject(value.get("subject")),
    )


def _text(value: Any, pointer: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ExtrasError(pointer, "must be a non-empty string")
    if len(value) > MAX_SUFFIX:
        raise ExtrasError(pointer, f"must be at most {MAX_SUFFIX} characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ExtrasError(pointer, "must not contain control characters")
    return value


def _headers(value: Any) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExtrasError("/$delivery/headers", "must be a map of header names to strings")
    if len(value) > MAX_HEADERS:
        raise ExtrasError("/$delivery/headers", f"must hold at most {MAX_HEADERS} headers")
    headers: dict[str, str] = {}
    for name, text in value.items():
        pointer = f"/$delivery/headers/{name}"
        if not _TOKEN.match(name):
            raise ExtrasError(pointer, "is not a valid header name (1-64 token characters)")
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith("ce-"):
            raise ExtrasError(pointer, "is set by the broker and cannot be set by a transformation")
        if not isinstance(text, str):
            raise ExtrasError(pointer, "must be a string")
        if len(text) > MAX_HEADER_VALUE:
            raise ExtrasError(pointer, f"must be at most {MAX_HEADER_VALUE} characters")
        if any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F for ch in text):
            raise ExtrasError(pointer, "must not contain control characters")
        headers[lowered] = text
    return headers


def _path(value: Any) -> str | None:
    text = _text(value, "/$delivery/path")
    if text is None:
        return None
    if text[0] not in "/?" or text.startswith("//") or not _PATH.match(text):
        raise ExtrasError(
            "/$delivery/path", "must start with '/' or '?' and hold only URL path and query characters"
        )
    parts = urlsplit(text)
    if parts.scheme or parts.netloc or ".." in parts.path.split("/") or "." in parts.path.split("/"):
        raise ExtrasError("/$delivery/path", "must not name another host, scheme or a '.' or '..' segment")
    return text


def _topic(value: Any) -> str | None:
    text = _text(value, "/$delivery/topic")
    if text is None:
        return None
    if any(ch in text for ch in "+#\x00") or "" in text.split("/"):
        raise ExtrasError("/$delivery/topic", "must be topic levels without wildcards or empty levels")
    return text


def _subject(value: Any) -> str | None:
    text = _text(value, "/$delivery/subject")
    if text is None:
        return None
    if not all(_NATS_TOKEN.match(token) for token in text.split(".")):
        raise ExtrasError(
            "/$delivery/subject", "must be subject tokens (letters, digits, '_', '-') joined by '.'"
        )
    return text


def destination_with(destination: Destination, extras: Extras) -> Destination:
    """The subscription's destination with ``extras`` applied (itself when there are none):
    headers added to the HTTP settings' headers, the path appended to the sink URL's path and
    its query to the sink's query, the topic and subject appended as further levels."""
    if extras.empty:
        return destination
    settings = dict(destination.settings)
    sink = destination.sink
    if extras.headers:
        settings["headers"] = {**(settings.get("headers") or {}), **extras.headers}
    if extras.path is not None:
        sink = _joined(sink, extras.path)
    if extras.topic is not None:
        settings["topicname"] = f"{settings.get('topicname') or ''}/{extras.topic}"
    if extras.subject is not None:
        settings["subject"] = f"{settings.get('subject') or ''}.{extras.subject}"
    return dataclasses.replace(destination, sink=sink, settings=settings)


def _joined(sink: str, suffix: str) -> str:
    """``suffix`` (``/path?query``) appended to the sink URL: the scheme, host and port stay."""
    base = urlsplit(sink)
    extra = urlsplit(suffix)
    path = base.path.rstrip("/") + extra.path if extra.path else base.path
    query = "&".join(part for part in (base.query, extra.query) if part)
    return urlunsplit((base.scheme, base.netloc, path, query, base.fragment))
