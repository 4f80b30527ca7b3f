"""Compile-time rejection: syntax errors with their position, and the length and nesting bounds
that keep hostile expressions from exhausting the parser or Python's stack."""

from __future__ import annotations

import pytest
from cefilters import FilterError, sql


@pytest.mark.parametrize(
    ("expression", "position", "reason"),
    [
        ("", 0, "empty expression"),
        ("   ", 3, "empty expression"),
        ("ABC(", 4, "unexpected end of expression"),
        ("1 +", 3, "unexpected end of expression"),
        ("(1 + 2", 6, "expected ')'"),
        ("1 + 2)", 5, "unexpected ')'"),
        ("1 2", 2, "unexpected integer 2"),
        ("x LIKE 123", 7, "LIKE needs a string literal pattern"),
        ("x LIKE y", 7, "LIKE needs a string literal pattern"),
        ("x IN ()", 2, "IN needs at least one value"),
        ("x IN 1", 5, "expected '(' after IN"),
        ("x IN (1 2)", 8, "expected ',' or ')' in IN"),
        ("EXISTS 'id'", 7, "expected an attribute name after EXISTS"),
        ("EXISTS", 6, "expected an attribute name after EXISTS"),
        ("'abc", 0, "unterminated string literal"),
        ('"abc\\"', 0, "unterminated string literal"),
        ("a_b = 1", 0, "invalid attribute name 'a_b'"),
        ("f1(2)", 0, "invalid function name 'f1'"),
        ("type == 'a'", 6, "expected an expression, found '='"),
        ("type = 'a' #", 11, "unexpected character '#'"),
        ("type\u00a0= 'a'", 4, "unexpected character"),
        ("NOT", 3, "unexpected end of expression"),
        ("a NOT b", 2, "unexpected 'NOT'"),
        ("ABS(1,)", 6, "expected an expression, found ')'"),
    ],
)
def test_syntax_errors_carry_their_position(expression: str, position: int, reason: str) -> None:
    """CESQL v1 §2 grammar; the position is the 0-based offset of the offending token."""
    with pytest.raises(sql.ParseError) as raised:
        sql.compile(expression)
    error = raised.value
    assert error.position == position
    assert error.kind == "parse"
    assert reason in error.reason
    assert f"at position {position}" in error.message


def test_parse_error_is_a_filter_error_with_a_caret_under_the_position() -> None:
    """ParseError is the FilterError (a ValueError) of the sql dialect; its message shows the
    expression with a caret under the problem. The path is empty: the dialect prefixes it."""
    with pytest.raises(sql.ParseError) as raised:
        sql.compile("source LIKE 42")
    error = raised.value
    assert isinstance(error, FilterError)
    assert isinstance(error, ValueError)
    assert error.path == ""
    lines = error.message.splitlines()
    assert lines[1].strip() == "source LIKE 42"
    assert lines[2].index("^") == lines[1].index("42")


def test_the_caret_snippet_of_a_long_expression_is_windowed() -> None:
    """A 4000-character expression is not copied whole into the message."""
    expression = "a = 1 AND " * 399 + "b = "
    with pytest.raises(sql.ParseError) as raised:
        sql.compile(expression)
    assert raised.value.position == len(expression)
    assert len(raised.value.message) < 300


def test_a_non_string_expression_is_a_type_error() -> None:
    """The API takes text; the sql dialect checks the JSON type before calling it."""
    with pytest.raises(TypeError):
        sql.compile(42)  # type: ignore[arg-type]  # deliberately the wrong type


# -- bounds ----------------------------------------------------------------------------------------


def test_expressions_longer_than_the_limit_are_rejected() -> None:
    """Hostile input: expression length is bounded (MAX_LENGTH characters)."""
    at_limit = "'" + "a" * (sql.MAX_LENGTH - 2) + "'"
    assert sql.compile(at_limit).evaluate({}).value == "a" * (sql.MAX_LENGTH - 2)
    with pytest.raises(sql.ParseError, match="longer than 4096") as raised:
        sql.compile(at_limit + " ")
    assert raised.value.position == sql.MAX_LENGTH


@pytest.mark.parametrize(
    "build",
    [
        lambda n: "(" * n + "1" + ")" * n,
        lambda n: "NOT " * n + "TRUE",
        lambda n: "- " * n + "1",
        lambda n: "ABS(" * n + "1" + ")" * n,
        lambda n: "'a'" + " LIKE 'a'" * n,
        lambda n: "TRUE" + " IN (TRUE)" * n,
        lambda n: "1 + (" * n + "1" + ")" * n,
        lambda n: "1 IN (" * n + "1" + ")" * n,
    ],
    ids=["parentheses", "not", "minus", "calls", "like-run", "in-run", "nested-sum", "nested-in"],
)
def test_nesting_is_bounded_with_a_parse_error_not_a_recursion_error(build: object) -> None:
    """Hostile input: nesting depth is bounded (MAX_DEPTH) whatever builds it, and exceeding it
    is a clear ParseError; never a RecursionError, not even far beyond the limit."""
    assert callable(build)
    within = build(sql.MAX_DEPTH // 2 - 2)
    sql.compile(within).evaluate({})
    deepest = max(n for n in range(sql.MAX_DEPTH, 4096) if len(build(n)) <= sql.MAX_LENGTH)
    for depth in (sql.MAX_DEPTH + 1, deepest):
        expression = build(depth)
        with pytest.raises(sql.ParseError, match="nested more than 64 levels"):
            sql.compile(expression)


@pytest.mark.parametrize("operator", ["AND", "OR", "XOR", "+", "*", "="])
def test_long_flat_runs_are_not_nesting(operator: str) -> None:
    """a OR b OR c ... is flat: its length, not its depth, is what the limits bound."""
    operand = "TRUE" if operator in ("AND", "OR", "XOR", "=") else "1"
    expression = f" {operator} ".join([operand] * 600)[: sql.MAX_LENGTH]
    expression = expression[: expression.rfind(f" {operator} ")]
    result = sql.compile(expression).evaluate({})
    assert result.errors == []


def test_str_of_a_parse_error_is_its_message() -> None:
    """Without a JSON Pointer (the engine has none; the dialect adds it) str() is the message."""
    with pytest.raises(sql.ParseError) as raised:
        sql.compile("1 +")
    assert str(raised.value) == raised.value.message
    assert str(raised.value).startswith("unexpected end of expression at position 3\n")
