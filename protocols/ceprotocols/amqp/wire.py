"""A bound CloudEvent's AMQP 1.0 message as the bytes proton writes for it, without proton.

Every delivery's message went through proton's ``Message``: its construction and ``encode()``,
which puts each application property through proton's Python data layer and tries buffers of
16, 32, 64... bytes until the message fits, cost more than the rest of the send (about 16 µs of
the worker's 65 µs per message in the AMQP benchmark). A message of the binding has few shapes:
an empty header, a properties section with at most the content type, application properties
whose values are strings, Booleans, longs and timestamps, one data section. :func:`encode`
writes those with the encodings proton chooses (AMQP 1.0 part 1: the smallest width of strings,
symbols, lists and binaries, ``smalllong`` for a long in a byte, a 32-bit map for the
properties), so the bytes are the same (tested against proton for every sample). Anything else
(a value of another type, a long outside 64 bits, a content type that is not ASCII) returns
None and goes through proton's ``Message`` as before.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from ceprotocols.amqp.binding import AmqpMessage, Timestamp

#: The header section as proton writes it for a message with default header fields (an empty
#: list): described type 0x70, list0.
_HEADER = b"\x00\x53\x70\x45"
#: The properties section without any field (described 0x73, list0).
_NO_PROPERTIES = b"\x00\x53\x73\x45"
#: The properties section's six fields before ``content-type`` (message-id, user-id, to,
#: subject, reply-to, correlation-id), all null.
_SIX_NULLS = b"\x40" * 6
_APPLICATION_PROPERTIES = b"\x00\x53\x74\xd1"
_DATA = b"\x00\x53\x75"
_SMALLEST_LONG, _LARGEST_LONG = -(2**63), 2**63 - 1
_U32 = struct.Struct(">I")
_TWO_U32 = struct.Struct(">II")
_I64 = struct.Struct(">q")


def encode(message: AmqpMessage) -> bytes | None:
    """The encoded message (header, properties, application properties, data), or None when
    it holds something this encoder does not write (proton's ``Message`` then does)."""
    parts = [_HEADER]
    content_type = message.content_type
    if content_type is None:
        parts.append(_NO_PROPERTIES)
    else:
        if not content_type.isascii():
            return None
        symbol = _symbol(content_type.encode())
        size = 1 + len(_SIX_NULLS) + len(symbol)  # the count, then the fields
        if size <= 0xFF:
            parts.append(b"\x00\x53\x73\xc0" + bytes((size, 7)) + _SIX_NULLS + symbol)
        else:
            parts.append(b"\x00\x53\x73\xd0" + _TWO_U32.pack(size + 3, 7) + _SIX_NULLS + symbol)
    properties = message.application_properties
    if properties:
        entries = _entries(properties)
        if entries is None:
            return None
        parts.append(_APPLICATION_PROPERTIES + _TWO_U32.pack(len(entries) + 4, 2 * len(properties)) + entries)
    body = message.body or b""
    if len(body) <= 0xFF:
        parts.append(_DATA + bytes((0xA0, len(body))) + body)
    else:
        parts.append(_DATA + b"\xb0" + _U32.pack(len(body)) + body)
    return b"".join(parts)


def _entries(properties: Mapping[str, Any]) -> bytes | None:
    out = bytearray()
    for name, value in properties.items():
        if name.__class__ is not str:
            return None
        out += _string(name)
        kind = value.__class__
        if kind is str:
            out += _string(value)
        elif kind is bool:
            out += b"\x41" if value else b"\x42"
        elif kind is int:
            if -128 <= value <= 127:
                out += b"\x55" + (value & 0xFF).to_bytes(1, "big")
            elif _SMALLEST_LONG <= value <= _LARGEST_LONG:
                out += b"\x81" + _I64.pack(value)
            else:
                return None
        elif kind is Timestamp:
            millis = value.millis
            if not _SMALLEST_LONG <= millis <= _LARGEST_LONG:
                return None
            out += b"\x83" + _I64.pack(millis)
        else:
            return None
    return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode()
    if len(data) <= 0xFF:
        return b"\xa1" + bytes((len(data),)) + data
    return b"\xb1" + _U32.pack(len(data)) + data


def _symbol(data: bytes) -> bytes:
    if len(data) <= 0xFF:
        return b"\xa3" + bytes((len(data),)) + data
    return b"\xb3" + _U32.pack(len(data)) + data
