"""The ``cel`` extension dialect, evaluated with cel-python over the event's attributes."""

from __future__ import annotations

import datetime
import sys

import cefilters
import pytest

EVENT: dict[str, object] = {"type": "com.example.order", "subject": "abcd", "seq": 5, "urgent": True}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('type.startsWith("com.example.") && size(subject) > 3', True),
        ('type == "com.example.order"', True),
        ('type == "other"', False),
        ("seq > 3 && urgent", True),
        ("seq > 30", False),
        ('missing == "x"', False),  # an undeclared reference is an evaluation error: no match
        ("1 / 0 == 1", False),  # division by zero: no match
        ("nosuchfunction(type)", False),
        ("seq", False),  # an int, not a bool: no match
        ('"true"', False),
        ("!(seq > 30)", True),
    ],
)
def test_cel_evaluation(expression: str, expected: bool) -> None:
    """Evaluation errors and non-boolean results mean no match; true means match."""
    assert cefilters.compile([{"cel": expression}]).matches(EVENT) is expected


def test_cel_sees_attributes_not_the_payload() -> None:
    """The dialect filters on context attributes; ``data`` is the payload, not a variable."""
    compiled = cefilters.compile([{"cel": 'type == "t" && !has(data)'}])
    assert compiled.matches({"type": "t", "data": {"big": list(range(1000))}}) is True
    assert cefilters.compile([{"cel": "data.big == 1"}]).matches({"data": {"big": 1}}) is False


def test_cel_never_raises_on_odd_event_values() -> None:
    """matches never raises, whatever the event holds."""
    compiled = cefilters.compile([{"cel": 'type == "x"'}])
    assert compiled.matches({"type": object()}) is False
    assert compiled.matches({"type": float("nan")}) is False


def test_values_without_a_cel_form_only_fail_expressions_that_read_them() -> None:
    """An unrepresentable attribute (an integer beyond 64 bits) does not spoil the others; bytes
    and datetimes become CEL bytes and timestamps."""
    event: dict[str, object] = {
        "type": "t",
        "huge": 10**30,
        "blob": b"ab",
        "time": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
    }
    assert cefilters.compile([{"cel": 'type == "t"'}]).matches(event) is True
    assert cefilters.compile([{"cel": "huge > 0"}]).matches(event) is False
    assert cefilters.compile([{"cel": 'blob == b"ab"'}]).matches(event) is True
    assert cefilters.compile([{"cel": 'time > timestamp("2026-01-01T00:00:00Z")'}]).matches(event) is True


def test_cel_parse_error_message_is_short() -> None:
    """Compile errors are summarised, not cel-python's multi-line dump."""
    with pytest.raises(cefilters.FilterError) as caught:
        cefilters.compile([{"all": [{"cel": "a && (b ||"}]}])
    assert caught.value.path == "/0/all/0/cel"
    assert caught.value.message == "invalid CEL expression: syntax error at line 1, column 9"


def test_compiling_never_changes_the_recursion_limit() -> None:
    """Only cel-python's parser is used (its Environment, which raises the recursion limit, is
    never built by the dialect): compiling and evaluating leave the interpreter as it was."""
    limit = sys.getrecursionlimit()
    compiled = cefilters.compile([{"cel": "true"}, {"cel": "[1, 2].all(x, x > 0)"}])
    assert compiled.matches(EVENT) is True
    assert sys.getrecursionlimit() == limit
