"""The ``all``, ``any`` and ``not`` dialects, which compose nested filter expressions."""

from __future__ import annotations

from collections.abc import Sequence

from ..base import Event, Filter
from ..errors import FilterError
from .contract import NestedCompiler

__all__ = ["AllFilter", "AnyFilter", "NotFilter", "compile_all", "compile_any", "compile_not"]


class AllFilter:
    """``{"all": [...]}``: every nested expression matches (also the top-level array's meaning)."""

    __slots__ = ("children",)

    def __init__(self, children: tuple[Filter, ...]) -> None:
        self.children = children

    def matches(self, event: Event) -> bool:
        """Whether every child matches; stops at the first that does not."""
        # A plain loop, not all(...): no generator object per event on the hot path.
        for child in self.children:  # noqa: SIM110
            if not child.matches(event):
                return False
        return True

    def __repr__(self) -> str:
        return f"AllFilter({list(self.children)!r})"


class AnyFilter:
    """``{"any": [...]}``: at least one nested expression matches."""

    __slots__ = ("children",)

    def __init__(self, children: tuple[Filter, ...]) -> None:
        self.children = children

    def matches(self, event: Event) -> bool:
        """Whether some child matches; stops at the first that does."""
        for child in self.children:  # noqa: SIM110 (see AllFilter.matches)
            if child.matches(event):
                return True
        return False

    def __repr__(self) -> str:
        return f"AnyFilter({list(self.children)!r})"


class NotFilter:
    """``{"not": {...}}``: the nested expression does not match."""

    __slots__ = ("child",)

    def __init__(self, child: Filter) -> None:
        self.child = child

    def matches(self, event: Event) -> bool:
        """The inverse of the child's result."""
        return not self.child.matches(event)

    def __repr__(self) -> str:
        return f"NotFilter({self.child!r})"


def _children(dialect: str, value: object, path: str, nested: NestedCompiler) -> tuple[Filter, ...]:
    # A str is a Sequence too, but never a filter array.
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise FilterError(path, f"{dialect!r} takes an array of filter expressions")
    if not value:
        raise FilterError(path, f"{dialect!r} needs at least one filter expression")
    return tuple(nested(item, f"{path}/{i}") for i, item in enumerate(value))


def compile_all(value: object, path: str, nested: NestedCompiler) -> Filter:
    """Build an ``all`` filter; raises FilterError for a non-array or an empty array."""
    return AllFilter(_children("all", value, path, nested))


def compile_any(value: object, path: str, nested: NestedCompiler) -> Filter:
    """Build an ``any`` filter; raises FilterError for a non-array or an empty array."""
    return AnyFilter(_children("any", value, path, nested))


def compile_not(value: object, path: str, nested: NestedCompiler) -> Filter:
    """Build a ``not`` filter; its value must be exactly one filter expression (an object).

    An array, even of one element, is rejected: the spec says "one nested filter expression".
    """
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        raise FilterError(path, "'not' takes exactly one filter expression (an object), not an array")
    return NotFilter(nested(value, path))
