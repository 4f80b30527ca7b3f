"""AMQP 1.0 protocol binding (CloudEvents AMQP Protocol Binding 1.0), pure: no IO.

Binary mode maps attributes onto application properties prefixed ``cloudEvents_`` (both
``cloudEvents_`` and ``cloudEvents:`` are accepted on input, section 3.1.3.1), with native AMQP
types: booleans, integers (long) and the ``time`` attribute as an AMQP timestamp (section
3.1.4). Messages are written here directly, with the checks the SDK's ``CloudEvent`` makes (this
runs for every delivery, and the SDK's event object cost more than the whole mapping), and read
through ``cloudevents.core.bindings.amqp``. ``datacontenttype`` is the message's
``content-type`` property. Structured mode carries the JSON event format in a data section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cloudevents.core.bindings import amqp as sdk_amqp
from cloudevents.core.exceptions import BaseCloudEventException

from ceprotocols.errors import BindingError
from ceprotocols.eventform import (
    STRUCTURED_JSON,
    binary_attributes,
    canonical_string,
    decode_structured,
    encode_structured,
    is_structured,
    parse_time,
    payload_of,
)
from ceprotocols.sdk import BYTES_FORMAT, from_sdk

PREFIX = "cloudEvents_"
PREFIXES = ("cloudEvents_", "cloudEvents:")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Values AMQP carries as they are (string, boolean, long); a tuple, not ``str | bool | int``,
#: which builds a new union object at every evaluation (this runs for every attribute sent).
_NATIVE = (str, bool, int)


@dataclass(frozen=True, slots=True)
class Timestamp:
    """An AMQP ``timestamp`` value (milliseconds since the Unix epoch); the sender turns it into
    the client library's timestamp type."""

    millis: int


@dataclass(frozen=True, slots=True)
class AmqpMessage:
    """The parts of an AMQP message a CloudEvent uses. ``body`` is one data section."""

    content_type: str | None
    application_properties: Mapping[str, Any] = field(default_factory=dict)
    body: bytes | None = None


def _time_property(value: Any) -> Timestamp | str:
    # An AMQP timestamp holds milliseconds: a finer time travels as its canonical string, which
    # the binding equally allows, so no precision is lost.
    moment = parse_time(value)
    text = str(value)
    fraction = text.split(".", 1)[1] if "." in text else ""
    digits = fraction[: len(fraction) - len(fraction.lstrip("0123456789"))]
    if digits[3:].strip("0"):
        return text
    return Timestamp((moment - _EPOCH) // timedelta(milliseconds=1))


def to_binary(event: Mapping[str, Any]) -> AmqpMessage:
    """Binary content mode (section 3.1): one ``cloudEvents_`` property per attribute, in the
    event's order; an event without ``time`` gets none (the binding adds no attribute).

    Raises BindingError for an event the CloudEvents SDK would refuse: a required attribute
    missing or empty, ``specversion`` other than ``1.0``, a ``subject``, ``datacontenttype`` or
    ``dataschema`` that is empty or not a string, a ``time`` that is not an RFC 3339 timestamp
    with an offset, an extension name other than lower-case letters and digits, or a value with
    no CloudEvents type.
    """
    properties: dict[str, Any] = {}
    content_type: str | None = None
    for name, value in binary_attributes(event, native=True):
        if name == "time":
            properties[PREFIX + name] = _time_property(value)
        elif name == "datacontenttype":
            content_type = value if value.__class__ is str else canonical_string(value)
        else:
            properties[PREFIX + name] = value if isinstance(value, _NATIVE) else canonical_string(value)
    return AmqpMessage(
        content_type=content_type, application_properties=properties, body=payload_of(event) or None
    )


def to_structured(event: Mapping[str, Any]) -> AmqpMessage:
    """Structured content mode with the JSON event format (section 3.2)."""
    return AmqpMessage(content_type=f"{STRUCTURED_JSON}; charset=utf-8", body=encode_structured(event))


def from_message(message: AmqpMessage) -> dict[str, Any]:
    """Decode a message in either mode, detected by its ``content-type`` (section 3.3).
    Raises BindingError."""
    if is_structured(message.content_type):
        if message.body is None:
            raise BindingError("a structured-mode message must have a body")
        return decode_structured(message.body)
    properties = {
        name: value.millis if isinstance(value, Timestamp) else value
        for name, value in message.application_properties.items()
        if name.startswith(PREFIXES)
    }
    if not properties:
        raise BindingError("no cloudEvents_ application properties and not in structured mode")
    sdk_message = sdk_amqp.AMQPMessage(
        properties={"content-type": message.content_type} if message.content_type else {},
        application_properties=properties,
        application_data=message.body or b"",
    )
    try:
        event = from_sdk(sdk_amqp.from_binary(sdk_message, BYTES_FORMAT))
    except (BaseCloudEventException, UnicodeDecodeError, ValueError, TypeError) as exc:
        if isinstance(exc, BindingError):
            raise
        raise BindingError(f"not a CloudEvent in AMQP binding: {exc}") from exc
    raw_time = next((v for k, v in properties.items() if k[len(PREFIX) :] == "time"), None)
    if isinstance(raw_time, str):  # keep the producer's exact RFC 3339 text (the SDK re-renders it)
        event["time"] = raw_time
    return event
