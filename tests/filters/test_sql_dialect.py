"""The ``sql`` dialect: a CloudEvents SQL expression as a subscription filter (Subscriptions API,
Filters, ``sql``; CESQL v1 filter usage: true only when the value is the Boolean TRUE and no error
occurred)."""

from __future__ import annotations

import cefilters
import pytest

EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "1",
    "type": "com.example.order",
    "source": "https://github.com/cloudevents/spec",
    "subject": "orders/42",
    "priority": 7,
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("source LIKE '%cloudevents%'", True),  # the spec's example
        ("type = 'com.example.order' AND priority > 5", True),
        ("priority > 10", False),
        ("missing = 'x'", False),  # missingAttribute error: no match
        ("1 / 0 = 0", False),  # math error: no match, even though the zero value compares true
        ("TRUE", True),
        # Not coerced: only the Boolean value TRUE passes (README, "Decisions"; CESQL filter usage).
        ("'true'", False),
        ("priority", False),
        ("NOT (priority > 10)", True),
    ],
)
def test_sql_filter_semantics(expression: str, expected: bool) -> None:
    """The filter matches only when the expression evaluates to TRUE without error."""
    compiled = cefilters.compile([{"sql": expression}])
    assert compiled.matches(EVENT) is expected
    assert compiled.matches(EVENT) is cefilters.sql.compile(expression).matches(EVENT)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("type =", "at position 6"),
        ("(type = 'a'", "at position"),
        ("NOSUCHFUNCTION(type)", "at position 0"),
    ],
)
def test_invalid_sql_is_rejected_with_position(expression: str, fragment: str) -> None:
    """ "Implementations SHOULD reject subscriptions with invalid CloudEvents SQL expressions": parse
    errors and calls to functions that do not exist are rejected at compile time."""
    with pytest.raises(cefilters.FilterError) as caught:
        cefilters.compile([{"any": [{"exact": {"type": "a"}}, {"sql": expression}]}])
    assert caught.value.path == "/0/any/1/sql"
    assert caught.value.message.startswith("invalid CloudEvents SQL expression: ")
    assert fragment in caught.value.message
    assert "\n" not in caught.value.message
    assert isinstance(caught.value.__cause__, cefilters.sql.ParseError)


def test_sql_length_and_depth_are_bounded() -> None:
    """Hostile input: overlong or deeply nested expressions are FilterErrors, not RecursionErrors."""
    with pytest.raises(cefilters.FilterError):
        cefilters.compile([{"sql": "(" * 100_000 + "TRUE" + ")" * 100_000}])
    with pytest.raises(cefilters.FilterError):
        cefilters.compile([{"sql": " OR ".join(["TRUE"] * 100_000)}])


def test_sql_filter_never_raises() -> None:
    """matches never raises, whatever the event holds."""
    compiled = cefilters.compile([{"sql": "subject LIKE 'orders/%' AND priority + 1 > 2"}])
    for odd in ({"subject": None}, {"subject": ["x"]}, {"priority": object()}, {"priority": 2**80}):
        assert compiled.matches(odd) is False
