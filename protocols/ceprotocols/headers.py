"""Percent-encoding of attribute values in protocol headers (HTTP binding 3.1.3.2, which the NATS
binding adopts): space, ``"``, ``%`` and every character outside U+0021..U+007E are written as the
``%XX`` escapes of their UTF-8 bytes. A receiver undoes RFC 7230 quoting and one round of
escaping, and refuses what the binding does not allow: raw bytes outside printable ASCII (a
sender must escape them) and escapes that do not decode to valid UTF-8 (overlong forms included).
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from ceprotocols.errors import BindingError

_KEEP = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "%"}
#: What may appear in a header value as it arrives: printable ASCII, space and tab.
_WIRE = re.compile(r"[\t\x20-\x7e]*")
#: A value that needs no escape: printable ASCII but ``"`` and ``%`` (U+0021, U+0023..U+0024,
#: U+0026..U+007E).
_PLAIN = re.compile(r"[\x21\x23\x24\x26-\x7e]*")


#: Whether a value needs no escape (a match) or :func:`percent_encode` must escape it (None):
#: a binding writing many values asks this first and saves a call for each plain value.
plain = _PLAIN.fullmatch


def percent_encode(value: str) -> str:
    """Escape ``value`` for a header, upper-case hex, one escape per UTF-8 byte."""
    if _PLAIN.fullmatch(value) is not None:  # most values: one match instead of a scan per character
        return value
    return "".join(ch if ch in _KEEP else "".join(f"%{b:02X}" for b in ch.encode()) for ch in value)


def percent_decode(value: str) -> str:
    """The attribute value a header carries. ``value`` is the header as received (HTTP servers
    decode header bytes as Latin-1, so a raw non-ASCII byte shows as a character above U+007F).

    Raises:
        BindingError: a raw character outside printable ASCII, or escapes that are not UTF-8.
    """
    if _WIRE.fullmatch(value) is None:
        raise BindingError(
            "the value holds raw bytes outside printable ASCII; the binding requires %-escapes"
        )
    value = value.strip(" \t")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        inner = value[1:-1]
        chars: list[str] = []
        escaped = False
        for ch in inner:
            if escaped or ch != "\\":
                chars.append(ch)
                escaped = False
            else:
                escaped = True
        value = "".join(chars)
    try:
        return unquote_to_bytes(value).decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise BindingError("the value is not valid percent-encoded UTF-8") from None
