"""Bridge between the JSON-format event dict and the CloudEvents SDK's ``CloudEvent``.

The Kafka and AMQP bindings delegate their header/property mapping to ``cloudevents.core.bindings``.
The SDK parses payloads itself (JSON bodies become dicts, other bodies strings), which loses the
difference between ``data`` and ``data_base64`` and mangles non-object JSON. So the event crosses
the bridge with its payload already as bytes (see :mod:`ceprotocols.eventform`) and
:data:`BYTES_FORMAT` hands those bytes through untouched in both directions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.exceptions import BaseCloudEventException
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from ceprotocols.errors import BindingError
from ceprotocols.eventform import (
    attributes_of,
    canonical_string,
    check_event,
    parse_time,
    payload_of,
    with_payload,
)


class _BytesFormat(JSONFormat):
    """The JSON event format, except that binary-mode payloads stay raw bytes."""

    def write_data(self, data: dict[str, Any] | str | bytes | None, datacontenttype: str | None) -> bytes:
        if isinstance(data, bytes | bytearray):
            return bytes(data)
        return super().write_data(data, datacontenttype)

    def read_data(self, body: bytes, datacontenttype: str | None) -> dict[str, Any] | str | bytes | None:
        return bytes(body) if body else None


BYTES_FORMAT = _BytesFormat()


def to_sdk(event: Mapping[str, Any], *, native: bool) -> CloudEvent:
    """The SDK event for ``event``, with its payload as bytes.

    ``native`` keeps Boolean and Integer extensions as Python values (AMQP carries them as native
    types); otherwise every extension becomes its canonical string, because the SDK writes header
    values with ``str()`` (``True`` instead of the canonical ``true``).
    """
    check_event(event)
    attributes: dict[str, Any] = {}
    for name, value in attributes_of(event).items():
        if name == "time":
            attributes[name] = parse_time(value)
        elif native and isinstance(value, bool | int | str):
            attributes[name] = value
        else:
            attributes[name] = canonical_string(value)
    try:
        return CloudEvent(attributes, payload_of(event))
    except BaseCloudEventException as exc:
        raise BindingError(f"not a valid CloudEvent: {exc}") from exc


def from_sdk(event: BaseCloudEvent) -> dict[str, Any]:
    """The JSON-format dict of an SDK event decoded with :data:`BYTES_FORMAT`."""
    attributes: dict[str, Any] = {}
    for name, value in event.get_attributes().items():
        if value is None:
            continue
        attributes[name] = canonical_string(value) if isinstance(value, datetime | bytes) else value
    data = event.get_data()
    if isinstance(data, str):
        body: bytes | None = data.encode()
    elif isinstance(data, bytes | bytearray | memoryview):
        body = bytes(data)
    elif data is None:
        body = None
    else:  # a structured message: the SDK already holds the JSON value
        attributes["data"] = data
        return attributes
    result = with_payload(attributes, body)
    check_event(result)
    return result
