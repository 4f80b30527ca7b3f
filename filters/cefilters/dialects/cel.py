"""The ``cel`` extension dialect: ``{"cel": "<CEL expression>"}``, evaluated by :mod:`cefilters.cel`.

Each event attribute is a CEL variable of the same name (``type``, ``source``, extensions), so
``type.startsWith("com.example.") && size(subject) > 3`` works as written. The payload (``data``,
``data_base64`` in a JSON-format event) is not: the dialect filters on context attributes. An
expression that fails to parse, or whose static cost is over the budget
(:data:`cefilters.cel.DEFAULT_BUDGET`), is rejected at compile time; at evaluation, an error (a
missing attribute, a bad call), a run over the budget, or a result that is not a boolean means
"no match".
"""

from __future__ import annotations

import functools
from typing import Any, Final

from ..base import Event
from ..cel import (
    DEFAULT_BUDGET,
    MAX_LENGTH,
    BudgetExceeded,
    CelEvaluationError,
    CelProgram,
    CelSyntaxError,
    compile_program,
)
from ..cel.values import to_output, type_name
from ..checks import Check
from ..errors import FilterError
from ..observer import BudgetObserver
from ..wording import QUOTE_LIMIT, quote, shorten
from .attributes import PAYLOAD_MEMBERS

__all__ = ["MAX_CEL_LENGTH", "CelFilter", "compile_cel", "environment"]

MAX_CEL_LENGTH: Final = MAX_LENGTH
"""Longest accepted expression, in characters."""


@functools.cache
def environment() -> Any:
    """A cel-python ``Environment``, for callers (benchmarks, tests) that compare with
    cel-python's own evaluator. The dialect itself uses only cel-python's parser."""
    import celpy  # deferred: importing celpy loads its grammar

    return celpy.Environment()


class CelFilter:
    """A compiled ``cel`` filter; ``text`` is the source expression."""

    __slots__ = ("_observer", "_program", "text")

    def __init__(self, text: str, program: CelProgram, observer: BudgetObserver | None = None) -> None:
        self.text = text
        self._program = program
        self._observer = observer

    def matches(self, event: Event) -> bool:
        """``True`` only when the expression evaluates, without error and within its budget,
        to the boolean ``true``."""
        try:
            return self._program.evaluate_raw(event) is True
        except BudgetExceeded as error:
            if self._observer is not None:
                self._observer.over_budget("cel", error.reason)
            return False
        except Exception:  # an evaluation error: no match
            return False

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The expression's result or a summary of its error; matched exactly when ``matches`` is."""
        try:
            result = self._program.evaluate_raw(event)
        except BudgetExceeded as error:
            if self._observer is not None:
                self._observer.over_budget("cel", error.reason)
            return [Check(pointer, False, f"cel: over budget: {shorten(str(error))}")]
        except Exception as error:
            return [Check(pointer, False, f"cel: {_error_summary(error)}")]
        if type(result) is bool:
            return [Check(pointer, result, f"cel: the result is {'true' if result else 'false'}")]
        shown = quote(result) if isinstance(result, str) else shorten(repr(to_output(result)), QUOTE_LIMIT)
        return [Check(pointer, False, f"cel: the result is {type_name(result)} {shown}, not a bool")]

    def __repr__(self) -> str:
        return f"CelFilter({self.text!r})"


def _error_summary(error: Exception) -> str:
    """An evaluation error in a few words."""
    if isinstance(error, CelEvaluationError):
        if error.reason.startswith("undeclared reference to "):
            name = error.reason.removeprefix("undeclared reference to ").strip("'")
            return f"evaluation error: the event has no attribute {quote(name)}"
        return f"evaluation error: {shorten(str(error))}"
    return f"evaluation error: {shorten(type(error).__name__)}"


def compile_cel(value: object, path: str, observer: BudgetObserver | None = None) -> CelFilter:
    """Compile a ``cel`` filter within :data:`cefilters.cel.DEFAULT_BUDGET`; raises FilterError at
    ``path`` when the text is not valid CEL or its static cost is over the budget."""
    if not isinstance(value, str):
        raise FilterError(path, f"'cel' takes a string CEL expression, not {type(value).__name__}")
    try:
        program = compile_program(value, DEFAULT_BUDGET, PAYLOAD_MEMBERS)
    except CelSyntaxError as error:
        raise type(error)(path, error.message, error.position) from None
    return CelFilter(value, program, observer)
