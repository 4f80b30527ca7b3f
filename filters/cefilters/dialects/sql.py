"""The ``sql`` dialect: ``{"sql": "<CloudEvents SQL expression>"}``.

The expression is compiled once by :mod:`cefilters.sql`; it matches when its value is ``TRUE`` and
no error was raised while evaluating it (Subscriptions API, Filters, ``sql`` dialect).
"""

from __future__ import annotations

from typing import Final

from .. import sql
from ..base import Event
from ..checks import Check
from ..errors import FilterError
from ..observer import BudgetObserver
from ..sql import Expression
from ..sql.errors import EvaluationFailure
from ..sql.types import Value
from ..wording import quote, shorten

__all__ = ["OVER_BUDGET", "SqlFilter", "compile_sql"]

OVER_BUDGET: Final = "over budget: "
"""How a CESQL function that refuses to build an over-budget string begins its error message."""


class SqlFilter:
    """A compiled ``sql`` filter; ``text`` is the source expression."""

    __slots__ = ("_observer", "expression", "text")

    def __init__(self, text: str, expression: Expression, observer: BudgetObserver | None = None) -> None:
        self.text = text
        self.expression = expression
        self._observer = observer

    def matches(self, event: Event) -> bool:
        """Whether the expression evaluates to ``TRUE`` without error (nor over its budget)."""
        try:
            return self.expression.check(event)
        except EvaluationFailure as failure:
            if self._observer is not None and failure.message.startswith(OVER_BUDGET):
                self._observer.over_budget("sql", failure.message)
            return False
        except Exception:  # a filter must not raise, whatever happens
            return False

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The expression's value or its first error; matched exactly when ``matches`` is."""
        try:
            result = self.expression.evaluate(event)
        except Exception as error:  # as in matches: the engine promises not to raise
            return [Check(pointer, False, f"sql: cannot evaluate: {shorten(type(error).__name__)}")]
        if result.errors:
            first = result.errors[0]
            if first.message.startswith(OVER_BUDGET) and self._observer is not None:
                self._observer.over_budget("sql", first.message)
            return [Check(pointer, False, f"sql: {first.kind} error: {shorten(first.message)}")]
        if result.value is True:
            return [Check(pointer, True, "sql: the value is true")]
        if result.value is False:
            return [Check(pointer, False, "sql: the value is false")]
        return [Check(pointer, False, f"sql: the value is {_spoken(result.value)}, not the Boolean true")]

    def __repr__(self) -> str:
        return f"SqlFilter({self.text!r})"


def _spoken(value: Value) -> str:
    if isinstance(value, str):
        return f"the String {quote(value)}"
    return f"the Integer {value}"


def compile_sql(value: object, path: str, observer: BudgetObserver | None = None) -> SqlFilter:
    """Parse a CloudEvents SQL expression once; raises FilterError (with the position) if invalid.

    Unknown functions are rejected here too (``strict_functions``): such an expression could only
    ever evaluate to an error, so the subscription would silently receive nothing.
    """
    if not isinstance(value, str):
        raise FilterError(path, f"'sql' takes a string expression, not {type(value).__name__}")
    try:
        expression = sql.compile(value, strict_functions=True)
    except sql.ParseError as err:
        # One line for an API error; the ParseError (position, caret snippet) stays the cause.
        raise FilterError(
            path, f"invalid CloudEvents SQL expression: {err.reason} at position {err.position}"
        ) from err
    return SqlFilter(value, expression, observer)
