"""The public surface of ``cefilters.sql``: names, error hierarchy and pickling."""

from __future__ import annotations

import doctest
import pickle
from pathlib import Path

import cefilters
import pytest
from cefilters import sql
from cefilters.sql import Function, Type


def test_public_names() -> None:
    """The contract names other parts use exist and are exported."""
    for name in ("compile", "Expression", "Result", "SqlError", "ParseError", "ERROR_KINDS", "MAX_DEPTH"):
        assert name in sql.__all__
        assert hasattr(sql, name)
    assert set(sql.ERROR_KINDS) == {
        "parse",
        "math",
        "cast",
        "missingFunction",
        "functionEvaluation",
        "missingAttribute",
        "generic",
    }
    assert issubclass(sql.ParseError, cefilters.FilterError)
    assert issubclass(sql.ParseError, ValueError)


def test_result_unpacks_and_compares() -> None:
    """Result is a (value, errors) named tuple; SqlError a (kind, message) one."""
    value, errors = sql.compile("5 / 0").evaluate({})
    assert value == 0
    assert [error.kind for error in errors] == ["math"]
    assert str(errors[0]).startswith("math: division by zero")
    assert sql.compile("1 + 1").evaluate({}) == sql.Result(2, [])


def test_expressions_pickle_by_recompiling() -> None:
    """A compiled expression crosses process boundaries (Spark executors): it pickles as its
    text and options and compiles again when loaded."""
    expression = sql.compile("type LIKE 'com.%' AND INT(hop) < 3", strict_functions=True)
    loaded = pickle.loads(pickle.dumps(expression))
    assert loaded.text == expression.text
    assert loaded.matches({"type": "com.x", "hop": "2"})
    assert not loaded.matches({"type": "com.x", "hop": "3"})


def shout(text: str) -> str:
    return text.upper() + "!"


def test_expressions_with_user_functions_pickle_when_the_functions_do() -> None:
    """A table of module-level functions pickles along with the expression."""
    functions = sql.BUILTINS.with_functions(Function("SHOUT", (Type.STRING,), Type.STRING, shout))
    expression = sql.compile("SHOUT(subject)", functions=functions)
    loaded = pickle.loads(pickle.dumps(expression))
    assert loaded.evaluate({"subject": "hi"}) == sql.Result("HI!", [])


def test_parse_errors_pickle_with_their_position() -> None:
    """ParseError survives pickling with position, reason, kind and message."""
    with pytest.raises(sql.ParseError) as raised:
        sql.compile("type = ")
    loaded = pickle.loads(pickle.dumps(raised.value))
    assert (loaded.position, loaded.reason, loaded.kind) == (7, "unexpected end of expression", "parse")
    assert str(loaded) == str(raised.value)


DOCS = Path(__file__).resolve().parents[3] / "docs/filters-cesql.md"


def test_the_documentation_examples_run() -> None:
    """Every ``>>>`` example in docs/filters-cesql.md and in the package docstring gives the
    output shown."""
    failures, attempted = doctest.testfile(str(DOCS), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert attempted >= 10
    assert failures == 0
    failures, attempted = doctest.testmod(sql, optionflags=doctest.ELLIPSIS)
    assert attempted >= 2
    assert failures == 0
