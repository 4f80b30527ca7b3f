"""Evaluation semantics beyond the TCK: casting rules, IN, attribute values of every JSON type,
fail-fast values, and the filter reading (``matches``)."""

from __future__ import annotations

import datetime

import pytest
from cefilters import sql

EVENT: dict[str, object] = {
    "specversion": "1.0",
    "id": "A234-1234-1234",
    "source": "/shop/eu/orders",
    "type": "com.example.order.created",
    "subject": "order-42",
    "time": "2024-05-01T12:00:00Z",
    "priority": 7,
    "urgent": True,
    "count": "10",
}


def evaluate(expression: str, event: dict[str, object] | None = None) -> sql.Result:
    return sql.compile(expression).evaluate(EVENT if event is None else event)


@pytest.mark.parametrize(
    ("expression", "value", "error"),
    [
        # = picks the overload from the right operand's type and casts the left one (§3.7).
        ("TRUE = 'yes'", False, None),
        ("'yes' = TRUE", False, "cast"),
        ("count = 10", True, None),
        ("10 = count", True, None),
        ("priority = '7'", True, None),
        ("'007' = priority", True, None),
        ("priority = '007'", False, None),
        ("urgent = 'TRUE'", False, None),
        ("'TRUE' = urgent", True, None),
        ("count = priority", False, None),
        ("count = urgent", False, "cast"),
        # No string ordering: both sides are cast to Integer.
        ("'b' < 'a'", False, "cast"),
        ("'1' < '10'", True, None),
        ("count > priority", True, None),
        # Arithmetic on every operand type.
        ("-'10'", -10, None),
        ("TRUE + TRUE", 2, None),
        ("count * '2'", 20, None),
        ("'5x' + 1", 0, "cast"),
        ("' 5' + 1", 0, "cast"),
        ("'1_0' + 1", 0, "cast"),
        ("'+5' + 1", 6, None),
        ("'٣' + 1", 0, "cast"),
        ("-5 / 3", -1, None),
        ("5 / -3", -1, None),
        ("-5 % 3", -2, None),
        ("5 % -3", 2, None),
        ("-7 / 2 * 2 + -7 % 2", -7, None),
        ("1 / missing", 0, "missingAttribute"),
        ("missing / 0", 0, "missingAttribute"),
        # Logic casts to Boolean.
        ("'true' AND 1", True, None),
        ("0 OR 'FALSE'", False, None),
        ("'maybe' AND TRUE", False, "cast"),
        ("NOT priority", False, None),
        ("NOT 0", True, None),
    ],
)
def test_operators_and_implicit_casts(expression: str, value: object, error: str | None) -> None:
    """CESQL v1 §3.4 operators with the §3.7 implicit casts; fail-fast zero values (§4.1)."""
    result = evaluate(expression)
    assert [e.kind for e in result.errors] == ([error] if error else [])
    assert type(result.value) is type(value)
    assert result.value == value


@pytest.mark.parametrize(
    ("expression", "value", "error"),
    [
        ("type IN ('a', 'com.example.order.created')", True, None),
        ("type NOT IN ('a', 'b')", True, None),
        ("priority IN (1, '7')", True, None),
        ("priority IN ('x')", False, "cast"),
        ("priority IN (7, 'x')", True, None),
        ("priority IN (1, 'x', 7)", False, "cast"),
        ("urgent IN ('true')", True, None),
        ("urgent IN (1)", True, None),
        ("'a' IN ('a', missing)", True, None),
        ("'a' IN (missing, 'a')", False, "missingAttribute"),
        ("'a' NOT IN (missing, 'a')", False, "missingAttribute"),
        ("subject IN (id, CONCAT('order-', priority * 6))", True, None),
        ("missing IN (1, 2)", False, "missingAttribute"),
        ("1 IN (1 / 0)", False, "math"),
    ],
)
def test_in_casts_each_item_to_the_left_operand_and_stops_at_the_first_match(
    expression: str, value: object, error: str | None
) -> None:
    """CESQL v1 §3.4.4: IN compares with = semantics after casting each item to the left
    operand's type; items are tried left to right up to the first match."""
    result = evaluate(expression)
    assert [e.kind for e in result.errors] == ([error] if error else [])
    assert result.value is value


@pytest.mark.parametrize(
    ("expression", "value", "error"),
    [
        ("subject", "order-42", None),
        ("priority", 7, None),
        ("urgent", True, None),
        ("SUBJECT", "order-42", None),
        ("missing", False, "missingAttribute"),
        ("priority + 1", 8, None),
        ("missing + 1", 0, "missingAttribute"),
        ("CONCAT(missing, 'x')", "", "missingAttribute"),
        ("LENGTH(missing)", 0, "missingAttribute"),
        ("EXISTS missing", False, None),
        ("EXISTS urgent", True, None),
        ("NOT EXISTS missing", True, None),
    ],
)
def test_attributes_keep_their_type_and_a_missing_one_fails_its_expression(
    expression: str, value: object, error: str | None
) -> None:
    """CESQL v1 §3.2/§4: attributes are typed values; a missing one is a missingAttribute error
    and the whole expression yields its type's zero value (fail-fast)."""
    result = evaluate(expression)
    assert [e.kind for e in result.errors] == ([error] if error else [])
    assert type(result.value) is type(value)
    assert result.value == value


@pytest.mark.parametrize(
    ("raw", "value", "error"),
    [
        ("text", "text", None),
        (True, True, None),
        (-5, -5, None),
        (3.0, 3, None),
        (datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC), "2024-05-01T12:00:00Z", None),
        (datetime.datetime(2024, 5, 1, 12, 0, 0, 5000), "2024-05-01T12:00:00.005000Z", None),
        (b"\x00\x01", "AAE=", None),
        (None, False, "missingAttribute"),
        (2**31, False, "generic"),
        (3.5, False, "generic"),
        ([1, 2], False, "generic"),
        ({"a": 1}, False, "generic"),
        (object(), False, "generic"),
    ],
)
def test_attribute_values_of_any_python_type(raw: object, value: object, error: str | None) -> None:
    """Events arrive in the JSON format's types; the canonical string form covers timestamps
    and binary given as Python objects; null is absent; anything else is a generic error."""
    result = sql.compile("x").evaluate({"x": raw})
    assert [e.kind for e in result.errors] == ([error] if error else [])
    assert result.value == value
    assert type(result.value) is type(value)


def test_exists_treats_null_as_absent() -> None:
    """The JSON format reads a null attribute as absent; EXISTS agrees with attribute access."""
    assert sql.compile("EXISTS x").evaluate({"x": None}).value is False


def test_function_failure_value_only_for_the_whole_expression() -> None:
    """CESQL v1 §4: a failing function yields its own value (LEFT: the input); an enclosing
    operator yields its zero value instead."""
    result = evaluate("LEFT('abc', -1)")
    assert result.value == "abc"
    assert [e.kind for e in result.errors] == ["functionEvaluation"]
    result = evaluate("LEFT('abc', -1) = 'abc'")
    assert result.value is False
    assert [e.kind for e in result.errors] == ["functionEvaluation"]


class _HostileMapping(dict[str, object]):
    def __getitem__(self, key: str) -> object:
        raise RuntimeError("boom")

    def get(self, key: str, default: object = None) -> object:
        raise RuntimeError("boom")


@pytest.mark.parametrize("expression", ["type = 'a'", "EXISTS type", "type", "1 + 1 = 2 AND type LIKE 'x%'"])
def test_evaluate_and_matches_never_raise(expression: str) -> None:
    """Whatever the event holds or does, evaluate answers (a generic error) and matches is False."""
    compiled = sql.compile(expression)
    for event in (_HostileMapping(), None, 42, "type"):
        result = compiled.evaluate(event)  # type: ignore[arg-type]  # deliberately not a Mapping
        if result.errors:
            assert result.errors[0].kind in ("generic", "missingAttribute")
        assert compiled.matches(event) is (result.value is True and not result.errors)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ("TRUE", True),
        ("urgent", True),
        ("'true'", False),
        ("1", False),
        ("priority", False),
        ("type", False),
        ("missing OR TRUE", False),
        ("TRUE OR missing", True),
        ("ABS(-2147483648) = 2147483647", False),
    ],
)
def test_matches_only_a_true_boolean_without_error(expression: str, matches: bool) -> None:
    """CESQL v1 §1 / Subscriptions API sql dialect: the event passes only on the Boolean true
    with no error; a String 'true' or an Integer does not."""
    compiled = sql.compile(expression)
    assert compiled.matches(EVENT) is matches
    result = compiled.evaluate(EVENT)
    assert (result.value is True and not result.errors) is matches


def test_expressions_are_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluation never goes back to the parser: it runs the closures built at compile time."""
    from cefilters.sql import lexer, parser

    compiled = sql.compile("type LIKE 'com.example.%' AND priority > 5")

    def no_parsing(*args: object) -> object:
        raise AssertionError("parsed during evaluation")

    monkeypatch.setattr(parser, "tokenize", no_parsing)
    monkeypatch.setattr(lexer, "tokenize", no_parsing)
    monkeypatch.setattr(parser, "parse", no_parsing)
    for _ in range(3):
        assert compiled.matches(EVENT)


def test_constant_subexpressions_keep_their_errors() -> None:
    """Folding constants at compile time never turns an evaluation error into a compile error
    nor drops it: 1/0 still fails when (and only when) it is evaluated."""
    assert [e.kind for e in evaluate("priority > 100 AND 1 / 0 = 1").errors] == []
    assert [e.kind for e in evaluate("priority > 1 AND 1 / 0 = 1").errors] == ["math"]
    assert [e.kind for e in evaluate("CONCAT('a', 'b') = 'ab'").errors] == []


def test_precedence_of_prefix_and_postfix_operators() -> None:
    """CESQL v1 §3.6: NOT and - bind only the next operand; LIKE binds tighter than arithmetic."""
    assert evaluate("NOT TRUE = FALSE").value is True  # (NOT TRUE) = FALSE
    assert [e.kind for e in evaluate("NOT 'abc' LIKE 'a%'").errors] == ["cast"]  # (NOT 'abc') LIKE
    assert evaluate("1 + 2 * 3").value == 7
    assert evaluate("1 + 2 LIKE '2'").value == 2  # 1 + (2 LIKE '2') = 1 + TRUE
    assert evaluate("2 * 6 IN (6)").value == 2  # 2 * (6 IN (6)) = 2 * TRUE


def test_the_payload_is_not_addressable() -> None:
    """CESQL v1 §1: only context attributes are visible; the JSON format's ``data`` member is the
    payload, so it reads as absent even when the event carries it (``data_base64`` cannot even
    be written: attribute names have no underscore)."""
    event = {**EVENT, "data": "secret", "data_base64": "c2VjcmV0"}
    assert [e.kind for e in evaluate("data = 'secret'", event).errors] == ["missingAttribute"]
    assert evaluate("EXISTS data", event).value is False
    assert not sql.compile("data LIKE '%'").matches(event)
    with pytest.raises(sql.ParseError):
        sql.compile("data_base64 = 'c2VjcmV0'")


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("'x' < missing", "cast"),  # ordering casts its left operand first
        ("'x' = missing", "missingAttribute"),  # equality evaluates the right one first
        ("'x' + missing", "cast"),
        ("missing + 'x'", "missingAttribute"),
        ("'x' AND missing", "cast"),
        ("LEFT(missing, 'x')", "missingAttribute"),
        ("LEFT('a', 'x') = missing", "cast"),
        ("'x' < 1 = missing", "cast"),
        ("1 = 1 < missing", "missingAttribute"),
    ],
)
def test_the_first_error_follows_the_evaluation_order(expression: str, error: str) -> None:
    """Fail-fast (CESQL v1 §4.1) reports the first error in a fixed order: left to right, each
    operand cast right after it is evaluated, except the left side of = (cast after the right
    side is known)."""
    assert [e.kind for e in evaluate(expression).errors] == [error]
