"""Built-in functions (CESQL v1 §3.7) beyond the TCK, and user-defined functions through a
``FunctionTable`` with the spec's overloading rules."""

from __future__ import annotations

import pytest
from cefilters import sql
from cefilters.sql import Function, FunctionError, FunctionTable, Type


def evaluate(expression: str, functions: FunctionTable = sql.BUILTINS) -> sql.Result:
    return sql.compile(expression, functions=functions).evaluate({"n": 3, "s": "Hello"})


@pytest.mark.parametrize(
    ("expression", "value", "error"),
    [
        ("TRIM('\u00a0\u2003 x \u3000\n')", "x", None),
        ("LENGTH(TRIM('\x1c x \x1f'))", 5, None),  # not White_Space: kept
        ("CONCAT_WS('-', 1, TRUE, 'x')", "1-true-x", None),
        ("CONCAT()", "", None),
        ("concat(s, n)", "Hello3", None),
        ("LEFT(s, 0)", "", None),
        ("RIGHT(s, 0)", "", None),
        ("RIGHT(s, 2)", "lo", None),
        ("SUBSTRING(s, -5)", "Hello", None),
        ("SUBSTRING(s, 5)", "o", None),
        ("SUBSTRING(s, 6)", "", "functionEvaluation"),
        ("SUBSTRING(s, 2, 100)", "ello", None),
        ("SUBSTRING(s, 2, 0)", "", None),
        ("SUBSTRING(s, 2, -1)", "", "functionEvaluation"),
        ("ABS(-2147483647)", 2147483647, None),
        ("INT(' 1')", 0, "cast"),
        ("BOOL('yes')", False, "cast"),
        ("STRING(-0)", "0", None),
        ("LENGTH(n)", 1, None),
        ("UPPER(LOWER(s))", "HELLO", None),
    ],
)
def test_builtins(expression: str, value: object, error: str | None) -> None:
    """CESQL v1 §3.7 built-ins with their argument casts and error values."""
    result = evaluate(expression)
    assert [e.kind for e in result.errors] == ([error] if error else [])
    assert type(result.value) is type(value)
    assert result.value == value


def _repeat(text: str, times: int) -> str:
    if times > 10:
        raise FunctionError("REPEAT: at most 10 times", value=text)
    return text * times


def _broken(text: str) -> str:
    raise KeyError(text)


TABLE = sql.BUILTINS.with_functions(
    Function("REPEAT", (Type.STRING, Type.INTEGER), Type.STRING, _repeat),
    Function("BROKEN", (Type.STRING,), Type.STRING, _broken),
    Function("WRONG", (), Type.INTEGER, lambda: "not an int"),
    Function("SUM", (Type.INTEGER, Type.INTEGER), Type.INTEGER, lambda *xs: sum(xs), variadic=Type.INTEGER),
)


@pytest.mark.parametrize(
    ("expression", "value", "error"),
    [
        ("REPEAT('ab', n)", "ababab", None),
        ("repeat(1, '2')", "11", None),
        ("REPEAT('ab', 11)", "ab", "functionEvaluation"),
        ("REPEAT('ab', 11) = 'ab'", False, "functionEvaluation"),
        ("BROKEN('x')", "", "functionEvaluation"),
        ("WRONG()", 0, "functionEvaluation"),
        ("SUM(1, 2)", 3, None),
        ("SUM(1, 2, 3, '4')", 10, None),
        ("SUM(1)", False, "missingFunction"),
    ],
)
def test_user_defined_functions(expression: str, value: object, error: str | None) -> None:
    """CESQL v1 §3.7: user functions get cast arguments; a failure yields its value or the return
    type's zero value with a functionEvaluation error; bugs and wrong return types are caught."""
    result = evaluate(expression, TABLE)
    assert [e.kind for e in result.errors] == ([error] if error else [])
    assert type(result.value) is type(value)
    assert result.value == value


def test_the_builtins_table_is_not_changed_by_extending_it() -> None:
    """with_functions returns a new table: REPEAT is unknown to the default one."""
    assert sql.BUILTINS.resolve("REPEAT", 2) is None
    assert TABLE.resolve("repeat", 2) is not None
    assert [e.kind for e in evaluate("REPEAT('a', 1)").errors] == ["missingFunction"]


def test_resolution_prefers_the_fixed_arity_overload() -> None:
    """CESQL v1 §3.7: a fixed-arity overload wins over the variadic one of the same name."""
    table = FunctionTable(
        [
            Function("F", (Type.STRING,), Type.STRING, lambda s: "fixed"),
            Function(
                "F", (Type.STRING, Type.STRING), Type.STRING, lambda *s: "variadic", variadic=Type.STRING
            ),
        ]
    )
    assert sql.compile("F('a')", functions=table).evaluate({}).value == "fixed"
    assert sql.compile("F('a', 'b', 'c')", functions=table).evaluate({}).value == "variadic"


@pytest.mark.parametrize(
    ("functions", "message"),
    [
        (
            [
                Function("F", (Type.STRING,), Type.STRING, str),
                Function("F", (Type.INTEGER,), Type.STRING, str),
            ],
            "two overloads",
        ),
        (
            [
                Function("F", (), Type.STRING, str, variadic=Type.STRING),
                Function("F", (Type.STRING,), Type.STRING, str, variadic=Type.STRING),
            ],
            "more than one variadic",
        ),
        (
            [
                Function("F", (Type.STRING, Type.STRING), Type.STRING, str),
                Function("F", (Type.STRING,), Type.STRING, str, variadic=Type.STRING),
            ],
            "more fixed arguments",
        ),
        ([Function("F1", (), Type.STRING, str)], "invalid function name"),
        ([Function("_F", (), Type.STRING, str)], "invalid function name"),
    ],
)
def test_overloading_rules_are_enforced(functions: list[Function], message: str) -> None:
    """CESQL v1 §3.7: one overload per arity, at most one variadic, and a variadic overload
    takes more fixed arguments than any other overload of the name."""
    with pytest.raises(ValueError, match=message):
        FunctionTable(functions)


def test_impure_user_functions_are_called_per_evaluation() -> None:
    """Only pure functions are folded at compile time; others run on every evaluation."""
    calls: list[int] = []

    def counter() -> int:
        calls.append(1)
        return len(calls)

    table = sql.BUILTINS.with_functions(Function("COUNTER", (), Type.INTEGER, counter))
    compiled = sql.compile("COUNTER() + 0", functions=table)
    assert [compiled.evaluate({}).value for _ in range(3)] == [1, 2, 3]
