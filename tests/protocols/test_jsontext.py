"""ceprotocols.jsontext: the one JSON reader and its limits (nesting, text, members, numbers)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from ceprotocols import jsontext
from hypothesis import given, settings
from hypothesis import strategies as st


def _nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(
    ("text", "limit", "path"),
    [
        (_nested(jsontext.MAX_DEPTH + 1), "nesting", (0,) * jsontext.MAX_DEPTH),
        (b"[" * 100_000, "nesting", ()),  # far beyond: no RecursionError escapes
        (b'{"a": {"b": "\\ud800"}}', "text", ("a", "b")),
        (b'[1, "x\\udfffy"]', "text", (1,)),
        (b'{"\\ud800": 1}', "text", ("\ud800",)),
        (b"\xff{}", "text", ()),
        (b"\xef\xbb\xbf{}", "text", ()),
        (b'{"a": 1, "a": 2}', "members", ()),
        (b'{"a": [NaN]}', "numbers", ()),
        (b'{"a": -Infinity}', "numbers", ()),
        (b"[1e400]", "numbers", (0,)),
        (b'{"n": 18446744073709551616}', "numbers", ("n",)),
        (b'{"n": -9223372036854775809}', "numbers", ("n",)),
        (b"9" * 5000, "numbers", ()),
        (b"", "syntax", ()),
        (b"{,}", "syntax", ()),
    ],
)
def test_refusals_name_the_limit_and_the_place(text: bytes, limit: str, path: tuple[Any, ...]) -> None:
    with pytest.raises(jsontext.JsonTextError) as info:
        jsontext.loads(text)
    assert info.value.limit == limit
    assert info.value.path == path
    str(info.value).encode("utf-8")  # a reason never holds what could not be shown


@pytest.mark.parametrize(
    "text",
    [
        _nested(jsontext.MAX_DEPTH),
        b'{"n": 18446744073709551615, "m": -9223372036854775808, "f": 1.5e300}',
        b'{"emoji": "\\ud83d\\ude00", "escaped": "\\\\ud800", "a": {"a": 1}}',
    ],
)
def test_at_the_limits_is_accepted(text: bytes) -> None:
    value = jsontext.loads(text)
    assert value == json.loads(text)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=jsontext.INT_MIN, max_value=jsontext.INT_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300)
@given(JSON_VALUES)
def test_whatever_is_accepted_is_read_back_and_writable(value: Any) -> None:
    """A value within the limits round-trips, and the fastest writer the broker uses (orjson)
    can write every value the reader accepts."""
    text = json.dumps(value)  # ensure_ascii: a generated lone surrogate becomes its escape
    if not _is_text(value):
        with pytest.raises(jsontext.JsonTextError) as info:
            jsontext.loads(text.encode())
        assert info.value.limit == "text"
        return
    parsed = jsontext.loads(text.encode())
    assert parsed == value
    assert orjson.loads(orjson.dumps(parsed)) == value


def _is_text(value: Any) -> bool:
    """Whether every string in ``value`` (member names included) can be encoded as UTF-8."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_is_text(k) and _is_text(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_is_text(v) for v in value)
    return True


def test_depth_counts_levels() -> None:
    assert jsontext.depth(1) == 0
    assert jsontext.depth({"a": [1, {"b": []}]}) == 4
    assert jsontext.depth(jsontext.loads(_nested(jsontext.MAX_DEPTH))) == jsontext.MAX_DEPTH
