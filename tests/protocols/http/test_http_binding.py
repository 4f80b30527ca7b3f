"""The pure HTTP binding (HTTP Protocol Binding 1.0, sections 3.1-3.3 and 3.1.3.2 header encoding)."""

from __future__ import annotations

import base64
import json

import pytest
from ceprotocols.errors import BindingError
from ceprotocols.http import from_batch, from_binary, from_structured, to_batch, to_binary, to_structured
from ceprotocols.http.binding import binary_parts, decode_header, encode_header

EVENT = {
    "specversion": "1.0",
    "id": "1",
    "source": "/s",
    "type": "t",
    "time": "2024-05-01T10:00:00.123456789Z",
    "subject": "Euro € 😀",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "count": 3,
    "flag": True,
    "datacontenttype": "application/json",
    "data": {"a": [1, 2]},
}


def test_binary_headers_and_body() -> None:
    """Attributes become ce- headers (canonical strings), datacontenttype the Content-Type."""
    message = to_binary(EVENT)
    assert message.headers["content-type"] == "application/json"
    assert message.headers["ce-subject"] == "Euro%20%E2%82%AC%20%F0%9F%98%80"  # spec example
    assert message.headers["ce-time"] == EVENT["time"]  # nanoseconds kept verbatim
    assert message.headers["ce-count"] == "3"
    assert message.headers["ce-flag"] == "true"
    assert "ce-datacontenttype" not in message.headers
    assert json.loads(message.body) == {"a": [1, 2]}


@pytest.mark.parametrize(
    "values",
    [
        {"source": "/s", "type": "t", "subject": "plain"},
        {"source": "/a b", "type": "t", "subject": "plain"},
        {"source": "/s", "type": 'q"', "subject": "100%"},
        {"source": "/s", "type": "t", "subject": "caf\u00e9"},
        {"source": "/s", "type": "t", "subject": ""},
    ],
)
def test_binary_headers_each_value_as_encode_header_has_it(values: dict[str, str]) -> None:
    """The string values are tested for escapes together (their concatenation): each header is
    still exactly what :func:`encode_header` makes of its value, whichever of them needs one,
    and :func:`binary_parts` gives :func:`to_binary`'s headers and body."""
    event = {"specversion": "1.0", "id": "7", **values, "count": 3, "data": {"x": 1}}
    headers, body = binary_parts(event)
    for name in ("specversion", "id", *values, "count"):
        assert headers["ce-" + name] == encode_header(event[name]), name
    message = to_binary(event)
    assert (message.headers, message.body) == (headers, body) == (headers, b'{"x":1}')


def test_binary_round_trip() -> None:
    """Decoding what was encoded gives the event back (values as strings for extensions)."""
    message = to_binary(EVENT)
    back = from_binary(message.headers, message.body)
    assert back["subject"] == EVENT["subject"]
    assert back["data"] == EVENT["data"]
    assert back["count"] == "3"


def test_binary_without_content_type_defaults_to_json_and_bytes_stay_bytes() -> None:
    """JSON Event Format 3.1: data without datacontenttype is JSON; data_base64 travels as bytes."""
    plain = {k: v for k, v in EVENT.items() if k != "datacontenttype"}
    assert to_binary(plain).headers["content-type"] == "application/json"
    raw = {**plain, "data_base64": base64.b64encode(b"\x00\xff").decode()}
    del raw["data"]
    message = to_binary(raw)
    assert message.body == b"\x00\xff"
    assert "content-type" not in message.headers
    no_data = {k: v for k, v in plain.items() if k != "data"}
    assert to_binary(no_data).body == b""


def test_header_decoding_rules() -> None:
    """Quoted strings are unquoted, lower-case hex accepted, invalid UTF-8 rejected (3.1.3.2)."""
    assert decode_header('"a\\"b%20c"') == 'a"b c'
    assert decode_header("%e2%82%ac") == "€"
    with pytest.raises(BindingError):
        decode_header("%C0%A0")
    assert encode_header('a b%"') == "a%20b%25%22"
    with pytest.raises(BindingError, match="ce-subject"):
        from_binary({"ce-subject": "%C0%A0"}, b"")


def test_structured_and_batch() -> None:
    """Structured: the JSON event with the cloudevents media type; batch: a JSON array."""
    message = to_structured(EVENT)
    assert message.headers["content-type"].startswith("application/cloudevents+json")
    assert from_structured(message.body) == EVENT
    batch = to_batch([EVENT, EVENT])
    assert batch.headers["content-type"].startswith("application/cloudevents-batch+json")
    assert from_batch(batch.body) == [EVENT, EVENT]
    with pytest.raises(BindingError):
        from_structured(b"[1]")
    with pytest.raises(BindingError):
        from_batch(b"{}")
    with pytest.raises(BindingError):
        from_batch(b"not json")


@pytest.mark.parametrize(
    "data",
    [
        {"n": 1, "s": 'é\u2028\x00"\\</', "list": [1.5, True, False], "nested": {"a": []}},
        "text",
        12345678901234567890123,  # beyond 64 bits: orjson refuses it, the standard encoder writes it
        {1: "a key that is not a string"},
        {"nothing": None},
        [float("nan"), float("inf")],  # not JSON: written as the standard encoder writes them
        3.25,
    ],
)
def test_json_payload_is_the_standard_encoding(data: object) -> None:
    """A JSON payload is the compact UTF-8 text the standard library writes, whether orjson or
    the standard encoder (for what orjson refuses or would write differently) writes it."""
    expected = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    assert to_binary({**EVENT, "data": data}).body == expected


def test_json_payload_floats_keep_their_value() -> None:
    """Small floats may be written in another exponent form than the standard library's; the
    number read back is the same."""
    values = [1.5e-7, 1e-5, 2.3042743157320294e-06, 1e16, 0.1, -0.0, 5e-324]
    body = to_binary({**EVENT, "data": values}).body
    assert json.loads(body) == values
