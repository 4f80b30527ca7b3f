"""CESQL error types: compile-time ``ParseError`` and evaluation-time ``SqlError`` kinds.

Evaluation never raises to the caller. Inside the compiled closures an error travels as
``EvaluationFailure`` (fail-fast: the first error stops evaluation), and ``Expression.evaluate``
turns it into a ``SqlError`` in ``Result.errors``.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, SupportsIndex

from cefilters.errors import FilterError

__all__ = [
    "ERROR_KINDS",
    "ErrorKind",
    "EvaluationFailure",
    "ParseError",
    "SqlError",
]

ErrorKind = Literal[
    "parse", "math", "cast", "missingFunction", "functionEvaluation", "missingAttribute", "generic"
]
"""The error kinds of CESQL v1 §4 under the names the conformance suite uses."""

ERROR_KINDS: Final[tuple[ErrorKind, ...]] = (
    "parse",
    "math",
    "cast",
    "missingFunction",
    "functionEvaluation",
    "missingAttribute",
    "generic",
)

# How much of a long expression a ParseError message shows on each side of the caret.
_SNIPPET_RADIUS: Final = 60


def _caret_snippet(text: str, position: int) -> str:
    """Two lines: the expression (windowed when long) and a caret under ``position``."""
    start = max(0, position - _SNIPPET_RADIUS)
    end = min(len(text), position + _SNIPPET_RADIUS)
    prefix = "..." if start > 0 else ""
    suffix = "..." if end < len(text) else ""
    # Control characters would break the caret alignment; show them as spaces.
    window = "".join(c if c.isprintable() else " " for c in text[start:end])
    caret_column = len(prefix) + (position - start)
    return f"    {prefix}{window}{suffix}\n    {' ' * caret_column}^"


class ParseError(FilterError):
    """A CESQL expression that cannot be compiled.

    ``position`` is the 0-based offset into the expression text where the problem was found;
    ``reason`` is the message without the position and caret lines. ``kind`` is ``"parse"``,
    or ``"missingFunction"`` for an unknown function when compiling with
    ``strict_functions=True``.
    """

    def __init__(self, text: str, position: int, reason: str, kind: ErrorKind = "parse") -> None:
        self.text = text
        self.position = position
        self.reason = reason
        self.kind: ErrorKind = kind
        message = f"{reason} at position {position}\n{_caret_snippet(text, position)}"
        super().__init__("", message)

    def __str__(self) -> str:
        # The engine knows no JSON Pointer (the dialect adds one): no empty "path: " prefix.
        return self.message if not self.path else super().__str__()

    def __reduce_ex__(
        self, protocol: SupportsIndex
    ) -> tuple[type[ParseError], tuple[str, int, str, ErrorKind]]:
        # Picklable with this constructor's own arguments (errors cross process boundaries);
        # FilterError.__reduce__ would pass the two-argument (path, message) form.
        return (type(self), (self.text, self.position, self.reason, self.kind))


class SqlError(NamedTuple):
    """An error raised while evaluating an expression against one event (CESQL v1 §4)."""

    kind: ErrorKind
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class EvaluationFailure(Exception):
    """Internal: carries the first evaluation error out of the compiled closures.

    ``value`` is the value the failing operation itself yields (``ABS`` overflow yields
    2147483647, ``LEFT`` with a negative length yields its input); ``None`` means "the zero
    value of the expression's type". It only matters when the failing operation is the root
    of the expression: any enclosing operator yields its own zero value instead.
    """

    __slots__ = ("kind", "message", "value")

    def __init__(self, kind: ErrorKind, message: str, value: bool | int | str | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.value = value
