"""The AMQP messages the sender encodes itself are byte for byte the ones proton encodes."""

from __future__ import annotations

import pytest
from ceprotocols.amqp import binding, wire
from ceprotocols.amqp.binding import AmqpMessage, Timestamp
from ceprotocols.amqp.connection import to_proton
from ceprotocols.tracecontext import TraceContext
from proton import Message

from protocols.ce_samples import PAYLOADS, make_event


def proton_bytes(message: AmqpMessage) -> bytes:
    return bytes(to_proton(message).encode())


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_bound_events_encode_as_proton_encodes_them(payload: str, mode: str) -> None:
    """Every payload kind, every attribute type of the samples, both content modes."""
    event = make_event(payload)
    message = binding.to_binary(event) if mode == "binary" else binding.to_structured(event)
    assert wire.encode(message) == proton_bytes(message)


def test_trace_properties_encode_as_proton_encodes_them() -> None:
    """The sender adds the trace context's properties to the binding's."""
    message = binding.to_binary(make_event())
    trace = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "a=1")
    traced = AmqpMessage(
        message.content_type, {**message.application_properties, **dict(trace.pairs())}, message.body
    )
    assert wire.encode(traced) == proton_bytes(traced)


@pytest.mark.parametrize(
    "value",
    [
        0,
        1,
        -1,
        127,
        -128,
        128,
        -129,
        2**31,
        -(2**31) - 1,
        2**63 - 1,
        -(2**63),
        True,
        False,
        "",
        "é😀",
        "x" * 255,
        "x" * 256,
        "é" * 128,
        Timestamp(0),
        Timestamp(1714566600123),
        Timestamp(-1),
    ],
    ids=repr,
)
def test_property_values_encode_as_proton_encodes_them(value: object) -> None:
    """Each value type at the edges of its encodings' widths."""
    message = AmqpMessage("application/json", {"cloudEvents_x": value}, b"{}")
    assert wire.encode(message) == proton_bytes(message)


@pytest.mark.parametrize("length", [0, 1, 238, 239, 240, 241, 247, 248, 249, 255, 256, 300])
def test_content_types_of_every_length_encode_as_proton_encodes_them(length: int) -> None:
    """The properties section's list and the symbol change width with the content type."""
    message = AmqpMessage("t" * length, {"cloudEvents_id": "1"}, b"x")
    assert wire.encode(message) == proton_bytes(message)


@pytest.mark.parametrize("size", [0, 1, 255, 256, 70_000])
def test_bodies_of_every_size_encode_as_proton_encodes_them(size: int) -> None:
    """The data section's binary changes width at 256 bytes; no body is an empty one."""
    message = AmqpMessage(None, {}, bytes(range(256)) * (size // 256) + bytes(size % 256) or None)
    assert wire.encode(message) == proton_bytes(message)


def test_many_properties_encode_as_proton_encodes_them() -> None:
    """A map larger than 255 bytes and 255 entries."""
    message = AmqpMessage(None, {f"cloudEvents_e{n}": f"v{n}" for n in range(300)}, b"x")
    assert wire.encode(message) == proton_bytes(message)


@pytest.mark.parametrize(
    "message",
    [
        AmqpMessage(None, {"cloudEvents_x": 2**63}, b"x"),
        AmqpMessage(None, {"cloudEvents_x": 1.5}, b"x"),
        AmqpMessage("tëxt/plain", {}, b"x"),
    ],
    ids=["long-beyond-64-bits", "float", "non-ascii-content-type"],
)
def test_what_it_does_not_encode_is_left_to_proton(message: AmqpMessage) -> None:
    """None: the sender sends proton's message for these, as before."""
    assert wire.encode(message) is None


def test_the_encoding_decodes_to_the_message() -> None:
    """proton reads the bytes back as the bound event."""
    event = make_event()
    decoded = Message()
    encoded = wire.encode(binding.to_binary(event))
    assert encoded is not None
    decoded.decode(encoded)
    assert decoded.properties is not None
    assert decoded.properties["cloudEvents_id"] == event["id"]
    assert decoded.content_type == "application/json"
