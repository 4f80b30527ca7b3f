"""NATS protocol binding (CloudEvents NATS Protocol Binding 1.0), pure: no IO.

Binary mode (NATS 2.2+ headers, section 3.1) puts every attribute, ``datacontenttype``
included, in a ``ce-`` header with the HTTP binding's percent-encoding. Structured mode puts the
JSON event format in the payload and names it in the ``Content-Type`` header.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ceprotocols.errors import BindingError
from ceprotocols.eventform import (
    ATTRIBUTE_NAME,
    PAYLOAD_MEMBERS,
    SPEC_ATTRIBUTES,
    STRUCTURED_JSON,
    canonical_string,
    check_event,
    decode_structured,
    encode_structured,
    is_structured,
    payload_of,
    with_payload,
)
from ceprotocols.headers import percent_decode, percent_encode, plain

HEADER_PREFIX = "ce-"
CONTENT_TYPE = "Content-Type"
_HEADER_NAMES = {name: HEADER_PREFIX + name for name in SPEC_ATTRIBUTES}


@dataclass(frozen=True, slots=True)
class NatsMessage:
    """A NATS message's headers (``None`` for a server without header support) and payload."""

    payload: bytes
    headers: Mapping[str, str] | None = field(default=None)


def to_binary(event: Mapping[str, Any]) -> NatsMessage:
    """Binary content mode (section 3.1.3)."""
    check_event(event)
    headers: dict[str, str] = {}
    # attributes_of() inlined, string values not passed through canonical_string(), the spec
    # attributes' header names written once and plain values not passed to percent_encode():
    # this runs for every delivery.
    header_names = _HEADER_NAMES.get
    for name, value in event.items():
        if value is None or name in PAYLOAD_MEMBERS:
            continue
        text = value if value.__class__ is str else canonical_string(value)
        headers[header_names(name) or HEADER_PREFIX + name] = (
            text if plain(text) is not None else percent_encode(text)
        )
    return NatsMessage(payload=payload_of(event) or b"", headers=headers)


def to_structured(event: Mapping[str, Any]) -> NatsMessage:
    """Structured content mode with the JSON event format (section 3.2)."""
    return NatsMessage(payload=encode_structured(event), headers={CONTENT_TYPE: STRUCTURED_JSON})


def from_message(message: NatsMessage) -> dict[str, Any]:
    """Decode a message in either mode: structured when ``Content-Type`` names a CloudEvents
    format or when there are no ``ce-`` headers (servers before 2.2 are structured only),
    otherwise binary. Header names are case-insensitive. Raises BindingError."""
    headers = {name.lower(): value for name, value in (message.headers or {}).items()}
    attributes = {
        name[len(HEADER_PREFIX) :]: percent_decode(value)
        for name, value in headers.items()
        if name.startswith(HEADER_PREFIX)
    }
    if is_structured(headers.get(CONTENT_TYPE.lower())) or not attributes:
        return decode_structured(message.payload)
    invalid = sorted(name for name in attributes if not ATTRIBUTE_NAME.match(name))
    if invalid:
        raise BindingError(f"invalid attribute name(s) in ce- headers: {invalid}")
    event = with_payload(attributes, message.payload or None)
    check_event(event)
    return event
