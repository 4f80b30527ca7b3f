"""Semantics of the exact, prefix, suffix, all, any and not dialects (Subscriptions API, Filters)."""

from __future__ import annotations

import datetime
from typing import Any

import cefilters
import pytest
from cefilters.dialects import DIALECTS

EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "1",
    "type": "com.github.push",
    "source": "https://github.com/cloudevents/spec",
    "subject": "https://github.com/cloudevents/spec/pull/1",
    "seq": 42,
    "flag": True,
    "off": False,
    "ratio": 0.5,
    "count": 2.0,
    "blob": b"ab",
    "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
}


def matches(filters: list[dict[str, Any]], event: dict[str, object] = EVENT) -> bool:
    return cefilters.compile(filters).matches(event)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ({"exact": {"type": "com.github.push"}}, True),
        ({"exact": {"type": "com.github.push", "id": "1"}}, True),
        ({"exact": {"type": "com.github.push", "id": "2"}}, False),
        ({"exact": {"type": "com.github"}}, False),
        ({"exact": {"type": "COM.GITHUB.PUSH"}}, False),
        ({"exact": {"missing": "x"}}, False),
        ({"prefix": {"type": "com.github."}}, True),
        ({"prefix": {"type": "com.github.push"}}, True),
        ({"prefix": {"type": "com.github.", "subject": "https://github.com/cloudevents"}}, True),
        ({"prefix": {"type": "com.github.", "subject": "https://gitlab"}}, False),
        ({"prefix": {"type": "Com."}}, False),
        ({"prefix": {"missing": "x"}}, False),
        ({"suffix": {"type": ".push"}}, True),
        ({"suffix": {"type": ".push", "subject": "/pull/1"}}, True),
        ({"suffix": {"type": ".PUSH"}}, False),
        ({"suffix": {"missing": "x"}}, False),
    ],
)
def test_attribute_dialects(expression: dict[str, Any], expected: bool) -> None:
    """exact/prefix/suffix: every key must match, case-sensitively; a missing attribute never matches."""
    assert matches([expression]) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ({"exact": {"seq": "42"}}, True),
        ({"exact": {"seq": "42.0"}}, False),
        ({"prefix": {"seq": "4"}}, True),
        ({"suffix": {"seq": "2"}}, True),
        ({"exact": {"flag": "true"}}, True),
        ({"exact": {"flag": "True"}}, False),
        ({"exact": {"flag": "1"}}, False),
        ({"exact": {"off": "false"}}, True),
        ({"prefix": {"off": "fal"}}, True),
        ({"exact": {"ratio": "0.5"}}, False),
        ({"exact": {"count": "2"}}, True),
        ({"exact": {"blob": "YWI="}}, True),
        ({"exact": {"when": "2026-01-02T03:04:05Z"}}, True),
    ],
)
def test_non_string_values_compare_by_canonical_string(expression: dict[str, Any], expected: bool) -> None:
    """Non-string values compare by their CloudEvents canonical string (core spec, "Type System"):
    decimal Integers (an integral float is one), true/false, base64 Binary, RFC 3339 Timestamps;
    a value with no canonical form (a fractional float) never matches."""
    assert matches([expression]) is expected


def test_canonical_string_edge_cases() -> None:
    """Integer subclasses compare by number, str subclasses by characters; an integer too long to
    print has no canonical form (no match, no exception)."""
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    class Text(str):
        def __str__(self) -> str:
            return "other"

    assert matches([{"exact": {"level": "3"}}], {"level": Level.HIGH}) is True
    assert matches([{"exact": {"name": "abc"}}], {"name": Text("abc")}) is True
    assert matches([{"prefix": {"big": "1"}}], {"big": 10**5000}) is False


def test_odd_values_never_raise() -> None:
    """matches never raises, whatever the event holds."""
    odd: dict[str, object] = {"type": None, "source": b"bytes", "subject": ["a"], "seq": {"x": 1}}
    for dialect in ("exact", "prefix", "suffix"):
        for name in odd:
            assert matches([{dialect: {name: "a"}}], odd) is False
            assert matches([{"not": {dialect: {name: "a"}}}], odd) is True


def test_empty_filters_match_everything() -> None:
    """ "Absence of a filter or empty array implies a value of true.\""""
    assert matches([], {}) is True
    assert matches([], EVENT) is True


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ([{"exact": {"type": "com.github.push"}}, {"prefix": {"source": "https://github.com/"}}], True),
        ([{"exact": {"type": "com.github.push"}}, {"prefix": {"source": "https://gitlab.com/"}}], False),
        ([{"all": [{"exact": {"type": "com.github.push"}}, {"exact": {"id": "1"}}]}], True),
        ([{"all": [{"exact": {"type": "com.github.push"}}, {"exact": {"id": "9"}}]}], False),
        ([{"any": [{"exact": {"type": "x"}}, {"exact": {"id": "1"}}]}], True),
        ([{"any": [{"exact": {"type": "x"}}, {"exact": {"id": "9"}}]}], False),
        ([{"not": {"exact": {"type": "com.github.push"}}}], False),
        ([{"not": {"exact": {"type": "x"}}}], True),
        ([{"not": {"exact": {"missing": "x"}}}], True),
        ([{"not": {"not": {"prefix": {"type": "com."}}}}], True),
        (
            [
                {
                    "any": [
                        {"all": [{"exact": {"type": "x"}}, {"exact": {"id": "1"}}]},
                        {"all": [{"suffix": {"type": "push"}}, {"not": {"exact": {"id": "2"}}}]},
                    ]
                }
            ],
            True,
        ),
    ],
)
def test_logical_dialects(filters: list[dict[str, Any]], expected: bool) -> None:
    """all: every nested expression true; any: at least one; not: the inverse; the array is an all."""
    assert matches(filters) is expected


def test_compiled_filters_satisfy_the_filter_protocol() -> None:
    """Every dialect's compiled object implements the public Filter contract."""
    for expression in (
        {"exact": {"type": "a"}},
        {"prefix": {"type": "a"}},
        {"suffix": {"type": "a"}},
        {"all": [{"exact": {"type": "a"}}]},
        {"any": [{"exact": {"type": "a"}}]},
        {"not": {"exact": {"type": "a"}}},
        {"sql": "TRUE"},
        {"cel": "true"},
    ):
        assert isinstance(cefilters.compile([expression]), cefilters.Filter)
    assert isinstance(cefilters.compile([]), cefilters.Filter)


def test_registry_names_the_seven_dialects_and_cel() -> None:
    """Subscriptions API, Filters: "This specification defines the following 7 filter dialects that
    all implementations MUST support"; ``cel`` is this library's extension. The registry is what the
    broker advertises, so it must be exactly these."""
    assert set(DIALECTS) == {"exact", "prefix", "suffix", "all", "any", "not", "sql", "cel"}
