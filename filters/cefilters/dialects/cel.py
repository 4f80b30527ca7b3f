"""The ``cel`` extension dialect: ``{"cel": "<CEL expression>"}``, evaluated with cel-python.

Each event attribute is a CEL variable of the same name (``type``, ``source``, extensions), so
``type.startsWith("com.example.") && size(subject) > 3`` works as written. The payload (``data``,
``data_base64`` in a JSON-format event) is not: the dialect filters on context attributes, and
converting a large payload for every event would cost more than the evaluation. An expression that fails
to parse is rejected at compile time; at evaluation, an error (a missing attribute, a bad call) or a
result that is not a boolean means "no match".

cel-python's ``Environment`` calls ``sys.setrecursionlimit`` when it is constructed and builds a
parser that takes about 0.1 s. We therefore build exactly one, lazily, on the first ``cel`` filter
compiled (:func:`environment`), never at import: a program that never uses CEL pays nothing and sees
no change of its recursion limit, and one that does pays once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Final

from ..base import Event
from ..checks import Check
from ..errors import FilterError
from ..wording import QUOTE_LIMIT, quote, shorten
from .attributes import PAYLOAD_MEMBERS

__all__ = ["MAX_CEL_LENGTH", "CelFilter", "compile_cel", "environment"]

MAX_CEL_LENGTH: Final = 4096
"""Longest accepted expression, in characters: bounds compile time and evaluation depth."""


@functools.cache
def environment() -> Any:
    """The process's single cel-python ``Environment`` (see the module docstring for why one)."""
    import celpy  # deferred: importing celpy loads its grammar

    return celpy.Environment()


class CelFilter:
    """A compiled ``cel`` filter; ``text`` is the source expression."""

    __slots__ = ("_bool_type", "_bytes_type", "_program", "_to_cel", "text")

    def __init__(self, text: str, program: Any) -> None:
        from celpy.adapter import json_to_cel
        from celpy.celtypes import BoolType, BytesType

        self.text = text
        self._program = program
        self._to_cel: Callable[[Any], object] = json_to_cel
        self._bool_type = BoolType
        self._bytes_type = BytesType

    def _activation(self, event: Event) -> dict[str, object]:
        """The event's attributes as CEL values. One that has no CEL form (an integer beyond 64
        bits, a nested object from a malformed event) is left out, so only an expression that
        reads it fails, as for a missing attribute."""
        activation: dict[str, object] = {}
        for name, value in event.items():
            if name in PAYLOAD_MEMBERS:
                continue
            try:
                if isinstance(value, bytes | bytearray | memoryview):
                    activation[name] = self._bytes_type(bytes(value))
                else:
                    activation[name] = self._to_cel(value)
            except Exception:  # celpy raises ValueError or TypeError for values it cannot map
                continue
        return activation

    def matches(self, event: Event) -> bool:
        """``True`` only when the expression evaluates, without error, to the boolean ``true``."""
        try:
            result = self._program.evaluate(self._activation(event))
        except Exception:  # celpy raises CELEvalError and, on odd values, plain TypeErrors
            return False
        # A CELEvalError may also come back as a value; only a real BoolType counts.
        return type(result) is self._bool_type and bool(result)

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The expression's result or a summary of its error; matched exactly when ``matches`` is."""
        try:
            result = self._program.evaluate(self._activation(event))
        except Exception as error:
            return [Check(pointer, False, f"cel: {_error_summary(error)}")]
        if type(result) is self._bool_type:
            return [Check(pointer, bool(result), f"cel: the result is {'true' if result else 'false'}")]
        if isinstance(result, Exception):  # celpy hands some errors back as the value
            return [Check(pointer, False, f"cel: {_error_summary(result)}")]
        shown = quote(str(result)) if isinstance(result, str) else shorten(str(result), QUOTE_LIMIT)
        return [Check(pointer, False, f"cel: the result is {_type_name(type(result))} {shown}, not a bool")]

    def __repr__(self) -> str:
        return f"CelFilter({self.text!r})"


_UNDECLARED: Final = "undeclared reference to '"
_CEL_CLASS: Final = re.compile(r"<class 'celpy\.celtypes\.(\w+)'>")
_TOKEN: Final = re.compile(r"Token\('\w+', '(\w+)'\)")


def _type_name(cls: type) -> str:
    """cel-python's ``IntType`` as CEL calls it, ``int``."""
    name = cls.__name__
    return name.removesuffix("Type").lower() if name.endswith("Type") else name


def _error_summary(error: Exception) -> str:
    """cel-python's error in a few words: its messages embed the whole activation, so keep the
    first argument, cut before the activation dump, and shortened."""
    message = str(error.args[0]) if error.args else type(error).__name__
    if message.startswith(_UNDECLARED):
        name = message[len(_UNDECLARED) :].split("'", 1)[0]
        return f"evaluation error: the event has no attribute {quote(name)}"
    message = message.split(" (in activation", 1)[0]
    message = _CEL_CLASS.sub(lambda found: found.group(1).removesuffix("Type").lower(), message)
    message = _TOKEN.sub(lambda found: found.group(1), message)
    return f"evaluation error: {shorten(message)}"


def compile_cel(value: object, path: str) -> CelFilter:
    """Parse a ``cel`` expression once; raises FilterError with a short summary when invalid.

    cel-python's own messages embed the whole expression and, at evaluation, the whole activation;
    we keep only the line and column.
    """
    if not isinstance(value, str):
        raise FilterError(path, f"'cel' takes a string CEL expression, not {type(value).__name__}")
    if not value.strip():
        raise FilterError(path, "the CEL expression must not be empty")
    if len(value) > MAX_CEL_LENGTH:
        raise FilterError(path, f"the CEL expression is longer than {MAX_CEL_LENGTH} characters")
    from celpy.celparser import CELParseError

    env = environment()
    try:
        program = env.program(env.compile(value))
    except CELParseError as err:
        where = f" at line {err.line}, column {err.column}" if err.line is not None else ""
        raise FilterError(path, f"invalid CEL expression: syntax error{where}") from None
    except RecursionError:
        raise FilterError(path, "invalid CEL expression: nested too deeply") from None
    except Exception as err:  # celpy reports some static errors with other classes
        raise FilterError(path, f"invalid CEL expression: {type(err).__name__}") from None
    return CelFilter(value, program)
