"""The bounded CEL evaluator against cel-python, the engine it replaces: the same answers (a value
or an error) on a spread of CEL, except where cel-python departs from the CEL specification (the
cases at the end, with the specification's answer)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from cefilters.cel import CelEvaluationError, compile_cel

VARIABLES: dict[str, Any] = {
    "type": "com.example.order",
    "subject": "abcd",
    "seq": 5,
    "urgent": True,
    "ratio": 2.5,
    "tags": ["a", "b", "c"],
    "m": {"k": 1, "n": {"x": "y"}},
}

AGREED = [
    "seq + 1",
    "seq - 10",
    "seq * seq",
    "seq / 2",
    "-seq / 2",
    "seq % 3",
    "-seq % 3",
    "ratio * 2.0",
    "ratio / 0.0",
    '"a" < "b"',
    '"abc" + "def"',
    'size("héllo")',
    "size(tags)",
    "size(m)",
    "tags[1]",
    "tags[5]",
    "m.k",
    "m.n.x",
    'm["k"]',
    "m.missing",
    '"b" in tags',
    '"k" in m',
    '"z" in m',
    'tags + ["d"]',
    'tags.map(t, t + "!")',
    'tags.filter(t, t != "b")',
    "tags.all(t, size(t) == 1)",
    'tags.exists(t, t == "c")',
    'tags.exists_one(t, t > "a")',
    "m.map(k, k)",
    "[1, 2, 3].map(x, x * x)",
    "[1, 2, 3].exists(x, x / 0 == 1)",
    "[1, 2, 3].exists(x, x == 2 || x / 0 == 1)",
    "has(m.k)",
    "has(m.zz)",
    "type(seq) == int",
    'type("s") == string',
    'int("42")',
    'int("x")',
    "uint(5)",
    "double(seq)",
    "string(seq)",
    "string(2.5)",
    'bytes("ab")',
    'seq > 3 ? "big" : "small"',
    "urgent && seq > 3",
    "urgent || 1 / 0 == 1",
    "!urgent",
    "1 / 0 == 1 && false",
    'subject.startsWith("ab")',
    'subject.endsWith("cd")',
    'subject.contains("bc")',
    'subject.matches("^a.*d$")',
    'timestamp("2026-01-02T03:04:05Z").getHours()',
    'timestamp("2026-01-02T03:04:05Z").getDayOfWeek()',
    'timestamp("2026-01-02T03:04:05Z").getMonth()',
    'duration("90m").getHours()',
    'timestamp("2026-01-02T03:04:05Z") < timestamp("2026-01-03T00:00:00Z")',
    "9223372036854775807 + 1",
    "-9223372036854775808 - 1",
    "18446744073709551615u + 1u",
    "0u - 1u",
    '[1, "a"] == [1, "a"]',
    '{"a": 1} == {"a": 1}',
    "[1, 2] == [1, 3]",
    "null == null",
    "dyn(seq) == 5",
    "0x10 + 1",
    '"\\\\u00e9" == "é"',
    'b"\\\\x00" == b"\\\\000"',
    'r"\\\\d" == "\\\\\\\\d"',
    "seq in [1, 5]",
    "tags[0] + m.n.x",
]

ERROR = "error"


def _plain(value: Any) -> Any:
    """cel-python's and this package's values in one comparable form."""
    from celpy import celtypes

    if isinstance(value, Exception):
        return ERROR
    if isinstance(value, celtypes.TimestampType | datetime.datetime):
        return ("timestamp", value.timestamp())
    if isinstance(value, celtypes.DurationType | datetime.timedelta):
        return ("duration", value.total_seconds())
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, list):
        return [_plain(member) for member in value]
    if isinstance(value, dict):
        return {_plain(key): _plain(member) for key, member in value.items()}
    return value


def _celpy(text: str) -> Any:
    import celpy
    from celpy.adapter import json_to_cel

    environment = celpy.Environment()
    try:
        program = environment.program(environment.compile(text))
        return _plain(program.evaluate({name: json_to_cel(value) for name, value in VARIABLES.items()}))
    except Exception:  # cel-python's evaluation errors, whatever their class
        return ERROR


def _bounded(text: str) -> Any:
    try:
        return _plain(compile_cel(text).evaluate_raw(VARIABLES))
    except CelEvaluationError:
        return ERROR


@pytest.mark.parametrize("text", AGREED)
def test_same_answer_as_cel_python(text: str) -> None:
    assert _bounded(text) == _celpy(text)


@pytest.mark.parametrize(
    ("text", "specified", "cel_python"),
    [
        # Heterogeneous numeric equality and ordering (CEL spec, "Numeric values").
        ("seq == 5.0", True, ERROR),
        ("seq == 5u", True, ERROR),
        ("1.0 == 1", True, ERROR),
        ("seq < 5.5", True, ERROR),
        ("5u in [5]", True, ERROR),
        # Equality of values of different types is false, not an error.
        ("seq == null", False, ERROR),
        # string(bool) is "true"/"false".
        ("string(true)", "true", "True"),
        # && is defined on bools only.
        ('true && "x"', ERROR, "x"),
    ],
)
def test_where_cel_python_departs_from_the_specification(
    text: str, specified: object, cel_python: object
) -> None:
    assert _celpy(text) == cel_python
    assert _bounded(text) == specified
