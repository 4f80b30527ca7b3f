"""MQTT 5 PUBLISH properties, encoded once by a small table-free encoder.

paho-mqtt's ``Properties`` validates every attribute set by scanning all property names (with a
string replace per name) and packs by scanning them again; for a binary-mode CloudEvent with a
handful of user properties that was the largest single cost of a publish. A delivery only ever
sends three PUBLISH properties, so they are written here directly (MQTT 5.0 section 2.2.2) and
handed to paho as a ``Properties`` whose ``pack()`` returns the prepared bytes, which paho also
reuses when it resends the PUBLISH after a reconnect.
"""

from __future__ import annotations

import struct

from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from ceprotocols.errors import BindingError
from ceprotocols.mqtt.binding import MqttMessage

# Property identifiers (MQTT 5.0 section 2.2.2.2, table 2-4).
_MESSAGE_EXPIRY_INTERVAL = b"\x02"
_CONTENT_TYPE = b"\x03"
_USER_PROPERTY = b"\x26"

_MAX_STRING = 0xFFFF  # UTF-8 strings carry a two-byte length (section 1.5.4)
_MAX_FOUR_BYTE = 0xFFFFFFFF
_LENGTH = struct.Struct("!H").pack  # the two-byte length of a UTF-8 string


def _string(value: str) -> tuple[bytes, bytes]:
    """A UTF-8 string (section 1.5.4) as its length and its bytes, to be joined with the rest."""
    data = value.encode("utf-8")
    if len(data) > _MAX_STRING:
        raise BindingError(f"MQTT property value longer than {_MAX_STRING} bytes: {value[:40]!r}...")
    return _LENGTH(len(data)), data


def _variable_byte_integer(value: int) -> bytes:
    """Section 1.5.5: seven bits per byte, least significant group first."""
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | 0x80 if value else digit)
        if not value:
            return bytes(out)


def encode(message: MqttMessage, expiry: int | None) -> bytes:
    """The property section of a PUBLISH (length prefix included) for ``message``."""
    parts: list[bytes] = []
    if expiry is not None:
        if not 0 <= expiry <= _MAX_FOUR_BYTE:
            raise BindingError(f"MQTT message expiry interval out of range: {expiry}")
        parts += (_MESSAGE_EXPIRY_INTERVAL, expiry.to_bytes(4, "big"))
    if message.content_type is not None:
        parts += (_CONTENT_TYPE, *_string(message.content_type))
    for name, value in message.user_properties:
        parts += (_USER_PROPERTY, *_string(name), *_string(value))
    body = b"".join(parts)
    return _variable_byte_integer(len(body)) + body


class PackedProperties(Properties):
    """PUBLISH properties already encoded; paho only ever calls ``pack()`` on them.

    paho's ``Properties.__init__`` builds two tables per instance and its ``__setattr__`` refuses
    unknown names, so this class skips the former and sets its fields with ``object.__setattr__``.
    """

    def __init__(self, packed: bytes) -> None:  # deliberately not calling paho's __init__
        object.__setattr__(self, "packetType", PacketTypes.PUBLISH)
        object.__setattr__(self, "_packed", packed)

    def pack(self) -> bytes:
        """The encoded property section."""
        packed: bytes = object.__getattribute__(self, "_packed")
        return packed

    def __str__(self) -> str:  # paho's walks the tables this class does not build
        return f"PackedProperties({len(self.pack())} bytes)"

    __repr__ = __str__


def publish_properties(message: MqttMessage, expiry: int | None) -> Properties | None:
    """Properties for paho's ``publish`` (``None`` when there are none to send)."""
    if message.content_type is None and not message.user_properties and expiry is None:
        return None
    return PackedProperties(encode(message, expiry))
