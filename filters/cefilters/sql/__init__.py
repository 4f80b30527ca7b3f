"""CloudEvents SQL (CESQL) v1: compile an expression once, evaluate it against many events.

>>> from cefilters import sql
>>> expression = sql.compile("type = 'com.example.order' AND source LIKE '/shop/%'")
>>> expression.matches({"type": "com.example.order", "source": "/shop/42"})
True
>>> sql.compile("1 / missing").evaluate({}).errors[0].kind
'missingAttribute'

Evaluation is fail-fast (CESQL v1 §4.1): the first error stops it, the value is the zero value
of the expression's type and ``Result.errors`` names the error. ``Expression.matches`` is the
filter reading: true only for the value ``true`` with no error.
"""

from __future__ import annotations

from cefilters.sql.errors import ERROR_KINDS, ErrorKind, ParseError, SqlError
from cefilters.sql.expression import Expression, Result
from cefilters.sql.functions import BUILTINS, Function, FunctionError, FunctionTable
from cefilters.sql.lexer import MAX_LENGTH
from cefilters.sql.parser import MAX_DEPTH
from cefilters.sql.types import Type, Value

__all__ = [
    "BUILTINS",
    "ERROR_KINDS",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "ErrorKind",
    "Expression",
    "Function",
    "FunctionError",
    "FunctionTable",
    "ParseError",
    "Result",
    "SqlError",
    "Type",
    "Value",
    "compile",
]


def compile(text: str, *, functions: FunctionTable = BUILTINS, strict_functions: bool = False) -> Expression:
    """Compile a CESQL v1 expression.

    Raises ``ParseError`` (a ``cefilters.FilterError``) with the 0-based ``position`` of the
    problem for a syntax error, an expression longer than ``MAX_LENGTH`` characters or nested
    deeper than ``MAX_DEPTH``.

    A call to a function that ``functions`` does not define (name and argument count) compiles,
    and evaluates to ``false`` with a ``missingFunction`` error, as the conformance suite
    expects. With ``strict_functions=True`` it is rejected here instead, with a ``ParseError``
    whose ``kind`` is ``"missingFunction"``: such an expression can never evaluate without error,
    so a subscription filter should refuse it up front.
    """
    if not isinstance(text, str):
        raise TypeError(f"a CESQL expression is a str, not {type(text).__name__}")
    return Expression(text, functions=functions, strict_functions=strict_functions)
