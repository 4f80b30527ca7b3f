"""Kafka protocol binding (CloudEvents Kafka Protocol Binding 1.0), pure: no IO.

Binary mode maps attributes onto ``ce_`` headers and ``datacontenttype`` onto ``content-type``
(section 3.2.3); records are written here directly, with the checks the SDK's ``CloudEvent``
makes, because this runs for every delivery and the SDK's event object costs more than the
whole mapping; records are read through ``cloudevents.core.bindings.kafka``. Structured mode
carries the JSON event format in the record value. The record key comes from a key attribute
(section 3.1 "Key Mapping"): by default the ``partitionkey`` extension, verbatim; the event
itself is never modified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cloudevents.core.bindings import kafka as sdk_kafka
from cloudevents.core.exceptions import BaseCloudEventException

from ceprotocols.errors import BindingError
from ceprotocols.eventform import (
    SPEC_ATTRIBUTES,
    STRUCTURED_JSON,
    binary_attributes,
    canonical_string,
    decode_structured,
    encode_structured,
    payload_of,
)
from ceprotocols.sdk import BYTES_FORMAT, from_sdk

CONTENT_TYPE = "content-type"
HEADER_PREFIX = "ce_"
DEFAULT_KEY_ATTRIBUTE = "partitionkey"

Headers = tuple[tuple[str, bytes], ...]
#: The header of each spec attribute, written once rather than joined for every record.
_HEADER_NAMES = {name: HEADER_PREFIX + name for name in SPEC_ATTRIBUTES} | {"datacontenttype": CONTENT_TYPE}


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """A Kafka record as any client produces or consumes it. ``value`` is ``None`` for a
    binary-mode event without data (a tombstone, section 3.2.3)."""

    headers: Headers
    key: bytes | None
    value: bytes | None

    def header(self, name: str) -> bytes | None:
        """The first header named ``name`` (case-insensitive), if any."""
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)


def record_key(event: Mapping[str, Any], key_attribute: str | None = None) -> bytes | None:
    """The record key: the canonical string of ``key_attribute`` (default ``partitionkey``)."""
    value = event.get(key_attribute or DEFAULT_KEY_ATTRIBUTE)
    return None if value is None else canonical_string(value).encode()


def to_binary(event: Mapping[str, Any], *, key_attribute: str | None = None) -> KafkaRecord:
    """Binary content mode (section 3.2): one ``ce_`` header per attribute, in the event's order,
    valued with its canonical string (``time`` as the producer wrote it); ``datacontenttype`` as
    ``content-type``. An event without ``time`` gets none (the binding adds no attribute).

    Raises BindingError for an event the CloudEvents SDK would refuse: a required attribute
    missing or empty, ``specversion`` other than ``1.0``, an empty ``subject``,
    ``datacontenttype`` or ``dataschema``, a ``time`` that is not an RFC 3339 timestamp with an
    offset, an extension name other than lower-case letters and digits, or a value with no
    CloudEvents type.
    """
    header_names = _HEADER_NAMES.get
    headers: list[tuple[str, bytes]] = []
    for name, value in binary_attributes(event, native=False):
        text = value if value.__class__ is str else canonical_string(value)
        headers.append((header_names(name) or HEADER_PREFIX + name, text.encode()))
    return KafkaRecord(
        headers=tuple(headers), key=record_key(event, key_attribute), value=payload_of(event) or None
    )


def to_structured(event: Mapping[str, Any], *, key_attribute: str | None = None) -> KafkaRecord:
    """Structured content mode with the JSON event format (section 3.3)."""
    headers = ((CONTENT_TYPE, f"{STRUCTURED_JSON}; charset=UTF-8".encode()),)
    return KafkaRecord(headers=headers, key=record_key(event, key_attribute), value=encode_structured(event))


def from_message(record: KafkaRecord) -> dict[str, Any]:
    """Decode a record in either mode: structured when ``content-type`` starts with
    ``application/cloudevents`` (section 3.1), otherwise binary. Raises BindingError."""
    content_type = record.header(CONTENT_TYPE)
    try:
        if content_type is not None and content_type.decode().lower().startswith("application/cloudevents"):
            if record.value is None:
                raise BindingError("a structured-mode record must have a value")
            return decode_structured(record.value)
        # The key is not turned into an attribute: the binding forbids adding attributes from
        # out-of-band sources, and ``partitionkey`` (if the producer set one) is in the headers.
        message = sdk_kafka.KafkaMessage(headers=dict(record.headers), key=None, value=record.value or b"")
        event = from_sdk(sdk_kafka.from_binary(message, BYTES_FORMAT))
        raw_time = record.header(f"{HEADER_PREFIX}time")
        if raw_time is not None:  # keep the producer's exact RFC 3339 text (the SDK re-renders it)
            event["time"] = raw_time.decode()
        return event
    except (BaseCloudEventException, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, BindingError):
            raise
        raise BindingError(f"not a CloudEvent in Kafka binding: {exc}") from exc


def headers_from_client(
    headers: Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None,
) -> Headers:
    """Normalise a client's headers (a list or dict; values may be ``None`` or text) into :data:`Headers`."""
    items = headers.items() if isinstance(headers, Mapping) else headers or ()
    return tuple((name, value.encode() if isinstance(value, str) else value or b"") for name, value in items)
