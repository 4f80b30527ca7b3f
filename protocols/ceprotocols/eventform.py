"""Conversions between the JSON-format event dict and its wire parts, shared by every binding.

A binding in binary mode needs three things from an event: its attributes (without the payload),
the payload as bytes and the ``datacontenttype`` that describes those bytes. Structured mode needs
the JSON-format document. Decoding goes the other way. Keeping these rules in one place makes every
binding treat payloads alike (JSON Event Format 1.0, section 3.1 "Handling of data"):

* ``data_base64`` travels as the decoded bytes;
* ``data`` with a JSON content type (or none, which means ``application/json``) travels as JSON text;
* ``data`` with another content type is a string and travels as its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import orjson

from ceprotocols import jsontext
from ceprotocols.errors import BindingError

#: Members of the JSON form that are not context attributes.
PAYLOAD_MEMBERS = frozenset({"data", "data_base64"})
REQUIRED_ATTRIBUTES = ("specversion", "id", "source", "type")
STRUCTURED_JSON = "application/cloudevents+json"
STRUCTURED_PREFIX = "application/cloudevents"
BATCH_PREFIX = "application/cloudevents-batch"
#: Writes the JSON payloads orjson leaves (:func:`json_payload`) compactly, as UTF-8 text. One
#: instance for every payload: ``json.dumps`` with options builds a new encoder per call.
_PAYLOAD_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
#: Attribute names: lower-case ASCII letters and digits (Core spec 3.1.1 "Attribute Naming").
ATTRIBUTE_NAME = re.compile(r"^[a-z0-9]{1,20}$")
#: The context attributes the Core spec defines; any other is an extension.
SPEC_ATTRIBUTES = frozenset(
    {"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema"}
)
#: An extension name the CloudEvents SDK accepts (it checks no length).
EXTENSION_NAME = re.compile(r"[a-z0-9]+")
#: Optional attributes the CloudEvents SDK refuses empty (or of another type than string).
NOT_EMPTY = frozenset({"subject", "datacontenttype", "dataschema"})
# RFC 3339 section 5.6 date-time with field ranges, so only days 29-31 need a calendar check.
_RFC3339 = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?"
    r"([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)"
)


def is_timestamp(value: str) -> bool:
    """Whether ``value`` is an RFC 3339 date-time (section 5.6), the form of the ``time``
    attribute and of every Timestamp in the JSON format; the date must exist (no 2024-02-30)."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        return False
    day = int(match.group(3))
    return day <= 28 or day <= calendar.monthrange(int(match.group(1)), int(match.group(2)))[1]


_JSON_TYPE = re.compile(r"^[a-zA-Z0-9!#$&^_.+-]+/([a-zA-Z0-9!#$&^_.-]+\+)?json\s*(;.*)?$", re.IGNORECASE)
_TEXT_TYPE = re.compile(r"^(text/[^;]+|[^/;]+/([^;]*\+)?xml)\s*(;.*)?$", re.IGNORECASE)


def is_json_type(content_type: str | None) -> bool:
    """Whether a payload of this media type is JSON (``None`` means ``application/json``)."""
    if content_type is None or content_type == "application/json":  # most events: no match needed
        return True
    return bool(_JSON_TYPE.match(content_type.strip()))


def json_payload(data: Any) -> bytes:
    """``data`` as compact JSON text in UTF-8, the bytes a JSON payload travels as.

    orjson writes it (a twentieth of the standard library encoder's time for a small payload),
    with the same text but for floats written in exponent form (``1e-7``, not ``1e-07``: the same
    number). What orjson refuses (keys that are not strings, integers beyond 64 bits, other
    types) and what it would write as ``null`` (``NaN`` and the infinities, which JSON cannot
    hold) go through the standard library encoder, as every payload did before."""
    try:
        body = orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError is one
        return _PAYLOAD_ENCODER.encode(data).encode()
    if b"null" in body:  # a None, or a NaN written as null: written as before
        return _PAYLOAD_ENCODER.encode(data).encode()
    return body


def is_structured(content_type: str | None) -> bool:
    """Whether a message with this content type is in structured mode (binding rule: the
    media type starts with ``application/cloudevents``, case-insensitively)."""
    return content_type is not None and content_type.strip().lower().startswith(STRUCTURED_PREFIX)


def attributes_of(event: Mapping[str, Any]) -> dict[str, Any]:
    """Every context attribute of ``event`` (extensions included), without the payload and
    without ``null`` members (which the JSON format defines as absent)."""
    return {k: v for k, v in event.items() if k not in PAYLOAD_MEMBERS and v is not None}


_ABSENT = object()


def payload_of(event: Mapping[str, Any]) -> bytes | None:
    """The event's payload as the bytes a binary-mode message carries, or ``None`` if it has none."""
    get = event.get
    encoded = get("data_base64")
    if encoded is not None:
        try:
            return base64.b64decode(str(encoded), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BindingError(f"data_base64 is not valid base64: {exc}") from exc
    data = get("data", _ABSENT)
    if data is _ABSENT:
        return None
    content_type = get("datacontenttype")
    if content_type == "application/json" or is_json_type(content_type):  # most events: no call
        return json_payload(data)
    if not isinstance(data, str):
        raise BindingError(f"data of content type {content_type!r} must be a string in the JSON format")
    return data.encode()


def with_payload(attributes: Mapping[str, Any], body: bytes | None) -> dict[str, Any]:
    """Rebuild a JSON-format event from decoded attributes and a binary-mode body.

    A JSON body (by ``datacontenttype``) becomes ``data``; a textual body becomes a ``data``
    string; anything else becomes ``data_base64``. Raises BindingError for a body that claims
    to be JSON but is not.
    """
    event = dict(attributes)
    if body is None:
        return event
    content_type = event.get("datacontenttype")
    if is_json_type(content_type):
        try:
            event["data"] = jsontext.loads(body)
        except jsontext.JsonTextError as exc:
            if content_type is not None or exc.limit not in ("syntax", "text"):
                raise BindingError(f"payload is not valid JSON: {exc}") from exc
            # No content type and not JSON: keep the bytes exactly (JSON format 3.1).
            event["data_base64"] = base64.b64encode(body).decode()
        return event
    if content_type is not None and _TEXT_TYPE.match(content_type.strip()):
        try:
            event["data"] = body.decode()
            return event
        except UnicodeDecodeError:
            pass
    event["data_base64"] = base64.b64encode(body).decode()
    return event


def canonical_string(value: Any) -> str:
    """The CloudEvents canonical string form of an attribute value (Core spec 3.1.1 "Type
    System"): ``true``/``false``, decimal integers, RFC 3339 timestamps, base64 binary."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        text = value.isoformat(timespec="milliseconds" if value.microsecond % 1000 == 0 else "auto")
        text = text.replace(".000+", "+").replace(".000-", "-")
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    raise BindingError(f"attribute value {value!r} has no CloudEvents type")


def parse_time(value: Any) -> datetime:
    """An RFC 3339 ``time`` attribute as an aware datetime (BindingError if it is not one)."""
    if isinstance(value, datetime):
        return value
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise BindingError(f"time is not an RFC 3339 timestamp: {value!r}") from exc
    if parsed.tzinfo is None:
        raise BindingError(f"time has no UTC offset: {value!r}")
    return parsed


def binary_attributes(event: Mapping[str, Any], *, native: bool) -> Iterator[tuple[str, Any]]:
    """The event's context attributes for a binary-mode binding, in the event's order, checked
    as the CloudEvents SDK's ``CloudEvent`` checks them; each binding maps the values onto its
    own wire form. Payload members and ``null`` members are skipped; values are yielded as they
    are in the event.

    Raises BindingError (when the pair is reached, so before the binding writes it) for a
    required attribute missing or empty, ``specversion`` other than ``1.0``, a ``time`` that is
    not an RFC 3339 timestamp with an offset, an extension name other than lower-case letters
    and digits, or a ``subject``, ``datacontenttype`` or ``dataschema`` whose canonical string is
    empty. ``native`` is for a binding that carries Boolean and Integer values as native types
    (AMQP): those attributes must then also not be a Boolean or an Integer, which the SDK refuses
    there (a header-based binding carries them as their canonical, non-empty text).
    """
    check_event(event)
    if event["specversion"] != "1.0":
        raise BindingError(f"specversion must be '1.0', not {event['specversion']!r}")
    for pair in event.items():
        name, value = pair
        if value is None or name in PAYLOAD_MEMBERS:
            continue
        if name in SPEC_ATTRIBUTES:
            if name == "time":
                parse_time(value)
            elif (value.__class__ is not str or not value) and name in NOT_EMPTY:  # a non-empty string passes
                _check_not_empty(name, value, native=native)
        elif not (name.isascii() and name.isalnum() and (name.islower() or name.isdigit())):
            # The same test as EXTENSION_NAME.fullmatch(name), in half its time.
            raise BindingError(f"extension name {name!r} is not lower-case letters and digits")
        yield pair


def _check_not_empty(name: str, value: Any, *, native: bool) -> None:
    if native:
        if isinstance(value, bool | int) or not canonical_string(value):
            raise BindingError(f"{name} must be a non-empty string")
    elif not canonical_string(value):
        raise BindingError(f"{name} must not be empty")


def encode_structured(event: Mapping[str, Any]) -> bytes:
    """The event in the JSON event format, as UTF-8 bytes."""
    check_event(event)
    try:
        return json.dumps(dict(event), separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise BindingError(f"event is not serialisable as JSON: {exc}") from exc


def decode_structured(body: bytes | str) -> dict[str, Any]:
    """Parse a JSON-format event (within the input limits of :mod:`ceprotocols.jsontext`) and
    check its required attributes."""
    try:
        event = jsontext.loads(body)
    except jsontext.JsonTextError as exc:
        raise BindingError(f"structured message is not valid JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise BindingError("structured message must be a JSON object (one event)")
    check_event(event)
    return event


def check_event(event: Mapping[str, Any]) -> None:
    """Raise BindingError unless the required context attributes are non-empty strings and
    ``data``/``data_base64`` are not both present (Core spec 3.1, JSON format 3.1)."""
    get = event.get
    for required in REQUIRED_ATTRIBUTES:  # runs for every message: no list unless one is missing
        value = get(required)
        if not value or not isinstance(value, str):
            missing = [
                name for name in REQUIRED_ATTRIBUTES if not isinstance(get(name), str) or not get(name)
            ]
            raise BindingError(f"missing or empty required attribute(s): {', '.join(missing)}")
    if get("data") is not None and get("data_base64") is not None:
        raise BindingError("an event has either data or data_base64, not both")
