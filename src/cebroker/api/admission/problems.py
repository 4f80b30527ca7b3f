"""Collecting every problem in a request before answering, with RFC 6901 pointers."""

from __future__ import annotations

from cefilters.errors import pointer_token

from cebroker.errors import FieldProblem, ValidationError

#: Longest piece of user input quoted back in an error message.
QUOTE_LIMIT = 64


def child(pointer: str, key: str | int) -> str:
    """The JSON Pointer of member ``key`` under ``pointer`` (``~`` and ``/`` escaped)."""
    return f"{pointer}/{pointer_token(key)}"


def quote(value: object) -> str:
    """``value`` quoted for an error message, cut short so that huge input is not echoed whole.

    Only names (fields, protocols, schemes, enum members) are ever quoted, never values of
    credential fields.
    """
    text = repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 3] + "..."


def type_name(value: object) -> str:
    """The JSON type of ``value``, for "must be a string, got a number" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Problems:
    """An accumulator of :class:`FieldProblem` entries; raise them all at once with :meth:`check`."""

    def __init__(self) -> None:
        self.items: list[FieldProblem] = []

    def add(self, pointer: str, message: str) -> None:
        """Record that the field at ``pointer`` is wrong, and why."""
        self.items.append(FieldProblem(pointer, message))

    def __bool__(self) -> bool:
        return bool(self.items)

    def check(self, what: str = "the subscription") -> None:
        """Raise :class:`ValidationError` with every recorded problem, if there is any."""
        if not self.items:
            return
        if len(self.items) == 1:
            only = self.items[0]
            detail = f"{only.pointer or '/'}: {only.message}"
        else:
            detail = f"{what} has {len(self.items)} problems; each is listed in 'errors'"
        raise ValidationError(self.items, detail)
