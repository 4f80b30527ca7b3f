"""MQTT protocol binding (CloudEvents MQTT Protocol Binding 1.0), pure: no IO.

MQTT 3.1.1 has no message metadata, so it carries the JSON event format only (section 3.1).
MQTT 5 also has binary mode (section 3.2): the payload is the data, ``datacontenttype`` is the
PUBLISH ``Content Type`` property and every other attribute is a User Property named as the
attribute itself, without prefix, valued with its canonical string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ceprotocols.errors import BindingError
from ceprotocols.eventform import (
    ATTRIBUTE_NAME,
    STRUCTURED_JSON,
    attributes_of,
    canonical_string,
    check_event,
    decode_structured,
    encode_structured,
    is_structured,
    payload_of,
    with_payload,
)

UserProperties = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class MqttMessage:
    """The parts of a PUBLISH packet a CloudEvent uses. ``content_type`` and
    ``user_properties`` exist in MQTT 5 only and stay empty for MQTT 3.1.1."""

    payload: bytes
    content_type: str | None = None
    user_properties: UserProperties = ()


def to_structured(event: Mapping[str, Any], *, v5: bool = True) -> MqttMessage:
    """Structured content mode with the JSON event format (MQTT 3.1.1: section 3.1; MQTT 5:
    section 3.3, where the ``Content Type`` names the format)."""
    return MqttMessage(payload=encode_structured(event), content_type=STRUCTURED_JSON if v5 else None)


def to_binary(event: Mapping[str, Any], *, extra: Sequence[tuple[str, str]] = ()) -> MqttMessage:
    """MQTT 5 binary content mode (section 3.2); ``extra`` user properties (the subscription's
    ``userproperties``) come after the attributes."""
    check_event(event)
    attributes = attributes_of(event)
    content_type = attributes.pop("datacontenttype", None)
    properties = tuple((name, canonical_string(value)) for name, value in attributes.items())
    body = payload_of(event)
    return MqttMessage(
        payload=body or b"",
        content_type=None if content_type is None else str(content_type),
        user_properties=properties + tuple(extra),
    )


def from_message(message: MqttMessage) -> dict[str, Any]:
    """Decode a PUBLISH in either mode. Binary when it has a ``specversion`` user property and a
    content type that is not a CloudEvents format; otherwise structured (the only mode of MQTT
    3.1.1, whose payload is the JSON format by definition). Raises BindingError."""
    names = {name for name, _ in message.user_properties}
    if is_structured(message.content_type) or "specversion" not in names:
        if message.content_type is not None and message.content_type.lower().startswith(
            "application/cloudevents-batch"
        ):
            raise BindingError("the MQTT binding has no batch mode")
        return decode_structured(message.payload)
    attributes: dict[str, Any] = {}
    for name, value in message.user_properties:
        # User properties that cannot be attribute names belong to the application, not the event.
        if ATTRIBUTE_NAME.match(name) and name not in attributes:
            attributes[name] = value
    if message.content_type is not None:
        attributes["datacontenttype"] = message.content_type
    event = with_payload(attributes, message.payload or None)
    check_event(event)
    return event
