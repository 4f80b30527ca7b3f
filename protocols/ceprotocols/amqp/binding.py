"""AMQP 1.0 protocol binding (CloudEvents AMQP Protocol Binding 1.0), pure: no IO.

Binary mode maps attributes onto application properties prefixed ``cloudEvents_`` (both
``cloudEvents_`` and ``cloudEvents:`` are accepted on input, section 3.1.3.1) through
``cloudevents.core.bindings.amqp``, with native AMQP types: booleans, integers (long) and the
``time`` attribute as an AMQP timestamp (section 3.1.4). ``datacontenttype`` is the message's
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
from ceprotocols.eventform import STRUCTURED_JSON, decode_structured, encode_structured, is_structured
from ceprotocols.sdk import BYTES_FORMAT, from_sdk, parse_time, to_sdk

PREFIX = "cloudEvents_"
PREFIXES = ("cloudEvents_", "cloudEvents:")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
    """Binary content mode (section 3.1)."""
    message = sdk_amqp.to_binary(to_sdk(event, native=True), BYTES_FORMAT)
    properties = dict(message.application_properties)
    if "time" in event:
        properties[f"{PREFIX}time"] = _time_property(event["time"])
    return AmqpMessage(
        content_type=message.properties.get("content-type"),
        application_properties=properties,
        body=message.application_data or None,
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
