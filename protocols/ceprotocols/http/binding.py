"""The CloudEvents HTTP protocol binding, pure: JSON-format event dict <-> HTTP message.

No IO here. Binary mode puts every attribute but ``datacontenttype`` in a ``ce-`` header
(``datacontenttype`` is the ``Content-Type``) and the payload in the body; structured mode puts
the whole event in the body as ``application/cloudevents+json``; batch mode a JSON array as
``application/cloudevents-batch+json`` (HTTP Protocol Binding 1.0, sections 3.1-3.3).

The SDK's :class:`HTTPMessage` is the message type. The conversion itself works on the JSON
form directly rather than through SDK ``CloudEvent`` objects, because those re-render ``time``
through ``datetime`` (losing e.g. nanosecond digits) and the broker must forward attributes
exactly as received.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from cloudevents.core.bindings.http import HTTPMessage

from ceprotocols import jsontext
from ceprotocols.errors import BindingError
from ceprotocols.eventform import PAYLOAD_MEMBERS, canonical_string, json_payload, payload_of, with_payload
from ceprotocols.headers import percent_decode

__all__ = [
    "BATCH_CONTENT_TYPE",
    "CE_PREFIX",
    "STRUCTURED_CONTENT_TYPE",
    "HTTPMessage",
    "binary_parts",
    "decode_header",
    "encode_header",
    "from_batch",
    "from_binary",
    "from_structured",
    "to_batch",
    "to_binary",
    "to_structured",
]

CE_PREFIX = "ce-"
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json; charset=UTF-8"
BATCH_CONTENT_TYPE = "application/cloudevents-batch+json; charset=UTF-8"

# Section 3.1.3.2: printable ASCII is sent as is, except space, double quote and percent.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in ' "%')
#: A value of only those characters, sent as it is.
_PLAIN = re.compile("[" + re.escape(_SAFE) + "]*")


def encode_header(value: Any) -> str:
    """An attribute value as a ``ce-`` header value: canonical string, percent-encoded."""
    text = canonical_string(value)
    # Most values need no escape at all: one regular-expression match is cheaper than quote().
    if _PLAIN.fullmatch(text) is not None:
        return text
    return quote(text, safe=_SAFE)


def decode_header(value: str) -> str:
    """A ``ce-`` header value as the attribute string (see :func:`ceprotocols.headers.percent_decode`:
    raw non-ASCII bytes and escapes that are not UTF-8, e.g. the overlong ``%C0%A0``, are refused)."""
    return percent_decode(value)


def to_binary(event: Mapping[str, Any]) -> HTTPMessage:
    """The event in binary content mode. An event with ``data`` but no ``datacontenttype`` is
    sent as ``application/json`` (JSON Event Format 3.1)."""
    headers, body = binary_parts(event)
    return HTTPMessage(headers=headers, body=body)


def binary_parts(event: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
    """:func:`to_binary`'s headers (a new dict, the caller's to change) and body, without the
    :class:`HTTPMessage` (a frozen dataclass, whose construction costs as much as a third of
    the headers' own): what a sender that takes them apart again uses."""
    headers: dict[str, str] = {}
    # attributes_of() and encode_header() inlined: this runs for every HTTP delivery. Most
    # attribute values are strings that need no escape; they are tested together, in one
    # regular-expression match of their concatenation (plain exactly when each of them is),
    # and only when that fails one by one.
    strings: list[str] = []
    for name, value in event.items():
        if value is None or name in PAYLOAD_MEMBERS:
            continue
        if name == "datacontenttype":
            headers["content-type"] = str(value)
        elif value.__class__ is str:
            headers[CE_PREFIX + name] = value
            strings.append(value)
        else:
            headers[CE_PREFIX + name] = encode_header(value)
    if strings and _PLAIN.fullmatch("".join(strings)) is None:
        for name, value in event.items():
            if value.__class__ is str and name != "datacontenttype" and name not in PAYLOAD_MEMBERS:
                headers[CE_PREFIX + name] = encode_header(value)
    body = payload_of(event)
    if body is None:
        return headers, b""
    if "content-type" not in headers and event.get("data_base64") is None:
        headers["content-type"] = "application/json"
    return headers, body


def to_structured(event: Mapping[str, Any]) -> HTTPMessage:
    """The event in structured content mode (JSON event format)."""
    try:
        body = json_payload(event if type(event) is dict else dict(event))
    except (TypeError, ValueError) as exc:
        raise BindingError(f"event is not serialisable as JSON: {exc}") from exc
    return HTTPMessage(headers={"content-type": STRUCTURED_CONTENT_TYPE}, body=body)


def to_batch(events: Sequence[Mapping[str, Any]]) -> HTTPMessage:
    """Events in batched content mode (a JSON array)."""
    try:
        body = json_payload([e if type(e) is dict else dict(e) for e in events])
    except (TypeError, ValueError) as exc:
        raise BindingError(f"events are not serialisable as JSON: {exc}") from exc
    return HTTPMessage(headers={"content-type": BATCH_CONTENT_TYPE}, body=body)


def from_binary(headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """Decode a binary-mode message into the JSON form (attribute values stay strings).

    Only decodes: checking required attributes and value formats is the caller's job, so that
    it can report every problem at once. Raises :class:`BindingError` for undecodable headers
    or a body that claims to be JSON and is not.
    """
    attributes: dict[str, Any] = {}
    for raw_name, value in headers.items():
        name = raw_name.lower()
        if name.startswith(CE_PREFIX):
            try:
                attributes[name[len(CE_PREFIX) :]] = decode_header(value)
            except BindingError as exc:
                raise BindingError(f"{raw_name}: {exc}") from exc
        elif name == "content-type":
            attributes["datacontenttype"] = value
    return with_payload(attributes, body if body else None)


def _load(body: bytes | str) -> Any:
    try:
        return jsontext.loads(body)
    except jsontext.JsonTextError as exc:
        raise BindingError(f"body is not valid JSON: {exc}") from exc


def from_structured(body: bytes | str) -> dict[str, Any]:
    """Decode a structured-mode body (one JSON object); attribute checks are the caller's."""
    event = _load(body)
    if not isinstance(event, dict):
        raise BindingError("a structured message holds one JSON object")
    return event


def from_batch(body: bytes | str) -> list[Any]:
    """Decode a batch body (a JSON array; each member is checked by the caller)."""
    events = _load(body)
    if not isinstance(events, list):
        raise BindingError("a batch is a JSON array of events")
    return events
