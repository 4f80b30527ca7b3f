"""Percent-encoding of attribute values in protocol headers (HTTP binding 3.1.3.2, which the NATS
binding adopts): space, ``"``, ``%`` and every character outside U+0021..U+007E are written as the
``%XX`` escapes of their UTF-8 bytes; a receiver undoes one round of escaping and rejects bytes
that are not valid UTF-8."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from ceprotocols.errors import BindingError

_KEEP = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "%"}


def percent_encode(value: str) -> str:
    """Escape ``value`` for a header, upper-case hex, one escape per UTF-8 byte."""
    return "".join(ch if ch in _KEEP else "".join(f"%{b:02X}" for b in ch.encode()) for ch in value)


def percent_decode(value: str) -> str:
    """Undo RFC 7230 quoted-string quoting if present, then one round of percent-decoding.
    Raises BindingError for a result that is not valid UTF-8 (overlong forms included)."""
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
    except UnicodeDecodeError as exc:
        raise BindingError(f"header value is not valid percent-encoded UTF-8: {value!r}") from exc
