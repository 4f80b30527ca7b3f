"""The compiled ``Expression`` and its evaluation ``Result`` (CESQL v1 §1, §4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from cefilters.sql.compiler import compile_tree
from cefilters.sql.errors import EvaluationFailure, SqlError
from cefilters.sql.functions import BUILTINS, FunctionTable
from cefilters.sql.parser import parse
from cefilters.sql.types import Value, zero_value

__all__ = ["Expression", "Result"]


class Result(NamedTuple):
    """The outcome of evaluating an expression against one event.

    Fail-fast: ``errors`` holds at most one error, and when it is not empty ``value`` is the
    zero value of the expression's type (``false``, ``0``, ``""``), or the value the failing
    function itself yields when the failing function is the whole expression (``ABS``
    overflow yields 2147483647).
    """

    value: Value
    errors: list[SqlError]


_new_result = tuple.__new__


class Expression:
    """A compiled CESQL expression. Evaluate it against any number of events; it never
    raises, whatever the event holds."""

    __slots__ = ("_evaluate", "_functions", "_strict_functions", "_zero", "text", "type")

    def __init__(
        self, text: str, *, functions: FunctionTable = BUILTINS, strict_functions: bool = False
    ) -> None:
        """Compile ``text``; raises ``ParseError``. ``cefilters.sql.compile`` documents the options."""
        compiled = compile_tree(text, parse(text), functions, strict_functions)
        self.text = text
        """The source text."""
        self.type = compiled.type
        """The static result type (``Type.ANY`` for a bare attribute reference)."""
        self._evaluate = compiled.evaluate
        self._zero = zero_value(compiled.type)
        self._functions = functions
        self._strict_functions = strict_functions

    def __reduce__(
        self,
    ) -> tuple[Callable[[str, FunctionTable, bool], Expression], tuple[str, FunctionTable, bool]]:
        # Closures do not pickle, the text does: unpickling compiles again (Spark ships filters
        # to executor processes). The function table pickles with its implementations.
        return (_recompile, (self.text, self._functions, self._strict_functions))

    def evaluate(self, event: Mapping[str, object]) -> Result:
        """The expression's value for ``event`` (a JSON-format attribute map), with the
        first error raised, if any."""
        try:
            # tuple.__new__ directly: the named tuple's own __new__ is a Python-level frame that
            # costs a noticeable share of a fast evaluation.
            return _new_result(Result, (self._evaluate(event), []))
        except EvaluationFailure as failure:
            value = self._zero if failure.value is None else failure.value
            return Result(value, [SqlError(failure.kind, failure.message)])
        except Exception as error:  # e.g. a Mapping whose lookups raise: still an answer, not a crash
            return Result(self._zero, [SqlError("generic", f"cannot evaluate on this event: {error!r}")])

    def check(self, event: Mapping[str, object]) -> bool:
        """Whether the value is ``true``; raises the first ``EvaluationFailure`` instead of
        hiding it (so a caller can tell an over-budget failure from a plain "false")."""
        return self._evaluate(event) is True

    def matches(self, event: Mapping[str, object]) -> bool:
        """Whether ``event`` passes as a filter: the value is ``true`` and no error was raised."""
        try:
            return self._evaluate(event) is True
        except Exception:  # any error means "no match" (CESQL v1 §1); never raise to the caller
            return False

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def _recompile(text: str, functions: FunctionTable, strict_functions: bool) -> Expression:
    return Expression(text, functions=functions, strict_functions=strict_functions)
