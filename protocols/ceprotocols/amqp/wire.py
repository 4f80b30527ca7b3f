"""A bound CloudEvent's AMQP 1.0 message as the bytes proton writes for it, without proton.

Every delivery's message went through proton's ``Message``: its construction and ``encode()``,
which puts each application property through proton's Python data layer and tries buffers of
16, 32, 64... bytes until the message fits, cost more than the rest of the send (about 20 µs
of the worker thread's 65 to 70 µs per message in the AMQP benchmark; this encoder takes 2 µs).
A message of the binding has few shapes: an empty header, a properties section with at most the
content type, application properties whose values are strings, Booleans, longs and timestamps,
one data section. :func:`encode` writes those with the encodings proton chooses (AMQP 1.0 part
1: the smallest width of strings, symbols, lists and binaries, ``smalllong`` for a long in a
byte, a 32-bit map for the properties), so the bytes are the same (tested against proton for
every sample and at every width's limit). Anything else (a value of another type, a long outside
64 bits, a content type that is not ASCII) returns None and goes through proton's ``Message``
as before.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from ceprotocols.amqp.binding import PREFIX, AmqpMessage, Timestamp
from ceprotocols.eventform import SPEC_ATTRIBUTES

#: The header section as proton writes it for a message with default header fields (an empty
#: list): described type 0x70, list0.
_HEADER = b"\x00\x53\x70\x45"
#: The properties section without any field (described 0x73, list0).
_NO_PROPERTIES = b"\x00\x53\x73\x45"
#: The properties section's six fields before ``content-type`` (message-id, user-id, to,
#: subject, reply-to, correlation-id), all null.
_SIX_NULLS = b"\x40" * 6
#: The application-properties section's descriptor and the constructor of its map (proton
#: writes a 32-bit map whatever its size).
_APPLICATION_PROPERTIES = b"\x00\x53\x74\xd1"
_DATA = b"\x00\x53\x75"
_SMALLEST_LONG, _LARGEST_LONG = -(2**63), 2**63 - 1
_U32 = struct.Struct(">I")
_TWO_U32 = struct.Struct(">II")
_I64 = struct.Struct(">q")
#: The constructor and width of each string of up to 255 bytes (str8-utf8).
_STR8 = tuple(b"\xa1" + bytes((size,)) for size in range(256))
#: Each long from -128 to 127 as a smalllong, by its byte.
_SMALLLONG = tuple(b"\x55" + bytes((byte,)) for byte in range(256))
#: The encoded property names of the spec attributes (every message has several of them).
_NAMES = {PREFIX + name: _STR8[len(PREFIX + name)] + (PREFIX + name).encode() for name in SPEC_ATTRIBUTES}


def encode(message: AmqpMessage) -> bytes | None:
    """The encoded message (header, properties, application properties, data), or None when
    it holds something this encoder does not write (proton's ``Message`` then does)."""
    out = bytearray(_HEADER)
    content_type = message.content_type
    if content_type is None:
        out += _NO_PROPERTIES
    else:
        if not content_type.isascii():
            return None
        symbol = content_type.encode()
        size = len(symbol)
        # the count, the six nulls, the symbol's constructor and width, the symbol
        list_size = 1 + 6 + (2 if size <= 0xFF else 5) + size
        if list_size <= 0xFF:
            out += b"\x00\x53\x73\xc0" + bytes((list_size, 7))
        else:
            out += b"\x00\x53\x73\xd0" + _TWO_U32.pack(list_size + 3, 7)
        out += _SIX_NULLS
        out += b"\xa3" + bytes((size,)) if size <= 0xFF else b"\xb3" + _U32.pack(size)
        out += symbol
    properties = message.application_properties
    if properties:
        entries = _entries(properties)
        if entries is None:
            return None
        out += _APPLICATION_PROPERTIES
        out += _TWO_U32.pack(len(entries) + 4, 2 * len(properties))
        out += entries
    body = message.body or b""
    out += _DATA
    out += b"\xa0" + bytes((len(body),)) if len(body) <= 0xFF else b"\xb0" + _U32.pack(len(body))
    out += body
    return bytes(out)


def _entries(properties: Mapping[str, Any]) -> bytearray | None:
    out = bytearray()
    for name, value in properties.items():
        known = _NAMES.get(name)
        if known is not None:
            out += known
        elif name.__class__ is str:
            _string(out, name)
        else:
            return None
        kind = value.__class__
        if kind is str:
            _string(out, value)
        elif kind is bool:
            out += b"\x41" if value else b"\x42"
        elif kind is int:
            if -128 <= value <= 127:
                out += _SMALLLONG[value & 0xFF]
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
    return out


def _string(out: bytearray, text: str) -> None:
    data = text.encode()
    size = len(data)
    out += _STR8[size] if size <= 0xFF else b"\xb1" + _U32.pack(size)
    out += data
