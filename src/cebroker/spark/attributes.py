"""CloudEvents attribute rules, as the broker's ingress applies them, in pure standard-library code.

Spark executors validate rows before sending them, so that one bad row goes to the error
location instead of making the broker refuse a whole batch. This module must stay cheap to import
there: no broker service code; besides the standard library only the pure event-form rules of
``ceprotocols.eventform``, which the broker's ingress uses too, so both accept the same events.

The rules (CloudEvents 1.0 core + JSON event format): ``specversion`` is ``1.0``; ``id``,
``source`` and ``type`` are non-empty strings; attribute names are ``[a-z0-9]{1,20}``; ``time``
is an RFC 3339 timestamp; ``dataschema`` is an absolute URI; extension values are strings,
booleans or 32-bit integers; ``data`` and ``data_base64`` never both appear.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re

from ceprotocols.eventform import ATTRIBUTE_NAME, is_timestamp

SPECVERSION = "1.0"
#: Attributes every event carries.
REQUIRED = ("id", "source", "type", "specversion")
#: Optional context attributes defined by the core specification (all strings).
OPTIONAL = ("subject", "time", "datacontenttype", "dataschema")
#: Event members that carry the payload rather than a context attribute.
DATA_MEMBERS = ("data", "data_base64")

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:\S*")


class InvalidValue(ValueError):
    """A value that cannot be the named attribute; the message says why."""


def is_attribute_name(name: str) -> bool:
    """Whether ``name`` is a valid CloudEvents attribute name (lower-case a-z, 0-9, 1-20 chars)."""
    return ATTRIBUTE_NAME.fullmatch(name) is not None


def check_rfc3339(value: str) -> str:
    """Return ``value`` if it is an RFC 3339 timestamp, else raise :class:`InvalidValue`."""
    if not is_timestamp(value):
        raise InvalidValue(f"not an RFC 3339 timestamp: {value!r}")
    return value


def format_timestamp(value: dt.datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` suffix; a naive value is taken to be UTC already."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    text = value.replace(tzinfo=None).isoformat()
    return f"{text}Z"


def check_absolute_uri(value: str) -> str:
    """Return ``value`` if it is an absolute URI (scheme followed by ``:``), else raise."""
    if _ABSOLUTE_URI.fullmatch(value) is None:
        raise InvalidValue(f"not an absolute URI: {value!r}")
    return value


def check_non_empty(value: str) -> str:
    """Return ``value`` unless it is the empty string."""
    if not value:
        raise InvalidValue("must not be empty")
    return value


def check_int32(value: int) -> int:
    """Return ``value`` if it fits the CloudEvents Integer type (signed 32-bit)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise InvalidValue(f"integer {value} is outside the signed 32-bit range")
    return value


def check_base64(value: str) -> str:
    """Return ``value`` if it is valid base64 (the ``data_base64`` member)."""
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidValue("data_base64 is not valid base64") from None
    return value


def check_specversion(value: str) -> str:
    """Return ``value`` if it is the supported specification version."""
    if value != SPECVERSION:
        raise InvalidValue(f"unsupported specversion {value!r} (only {SPECVERSION!r})")
    return value
