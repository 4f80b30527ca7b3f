"""The ``all``, ``any`` and ``not`` dialects, which compose nested filter expressions."""

from __future__ import annotations

from collections.abc import Sequence

from ..base import Event, Filter
from ..checks import Check
from ..errors import FilterError
from ..observer import BudgetObserver
from ..wording import explain_filter, summary
from .contract import NestedCompiler

__all__ = [
    "AllFilter",
    "AnyFilter",
    "FilterArray",
    "NotFilter",
    "compile_all",
    "compile_any",
    "compile_not",
]


def _explain_children(children: tuple[Filter, ...], event: Event, pointer: str) -> list[list[Check]]:
    """Each child's checks; every child is explained, even past the one that decides, so that a
    person sees them all (filters are pure: the verdict is the same as the short-circuit's)."""
    return [explain_filter(child, event, f"{pointer}/{i}") for i, child in enumerate(children)]


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

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The ``all`` at ``pointer`` and its children at ``pointer/all/i``."""
        return _explain_all(self.children, event, pointer, f"{pointer}/all", "all")

    def __repr__(self) -> str:
        return f"AllFilter({list(self.children)!r})"


class FilterArray(AllFilter):
    """A subscription's whole ``filters`` array of two or more expressions: an implicit ``all``.

    It matches exactly as :class:`AllFilter` does (the index flattens both alike); it exists so
    that ``explain`` locates the array's elements at ``pointer/i`` rather than ``pointer/all/i``.
    """

    __slots__ = ()

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The array at ``pointer`` and its elements at ``pointer/i``."""
        return _explain_all(self.children, event, pointer, pointer, "filters")

    def __repr__(self) -> str:
        return f"FilterArray({list(self.children)!r})"


def _explain_all(
    children: tuple[Filter, ...], event: Event, pointer: str, nested: str, label: str
) -> list[Check]:
    explained = _explain_children(children, event, nested)
    own = [checks[0] for checks in explained]
    matched = all(check.matched for check in own)
    detail = summary(label, own, matched, every=True)
    return [Check(pointer, matched, detail), *(check for checks in explained for check in checks)]


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

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The ``any`` at ``pointer`` and its children at ``pointer/any/i``."""
        explained = _explain_children(self.children, event, f"{pointer}/any")
        own = [checks[0] for checks in explained]
        matched = any(check.matched for check in own)
        detail = summary("any", own, matched, every=False)
        return [Check(pointer, matched, detail), *(check for checks in explained for check in checks)]

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

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """The ``not`` at ``pointer`` and its expression at ``pointer/not``."""
        nested = explain_filter(self.child, event, f"{pointer}/not")
        if nested[0].matched:
            detail = f"not: {nested[0].pointer} matched, so this condition does not"
        else:
            detail = f"not: {nested[0].pointer} did not match, so this condition does"
        return [Check(pointer, not nested[0].matched, detail), *nested]

    def __repr__(self) -> str:
        return f"NotFilter({self.child!r})"


def _children(dialect: str, value: object, path: str, nested: NestedCompiler) -> tuple[Filter, ...]:
    # A str is a Sequence too, but never a filter array.
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise FilterError(path, f"{dialect!r} takes an array of filter expressions")
    if not value:
        raise FilterError(path, f"{dialect!r} needs at least one filter expression")
    return tuple(nested(item, f"{path}/{i}") for i, item in enumerate(value))


def compile_all(
    value: object, path: str, nested: NestedCompiler, observer: BudgetObserver | None = None
) -> Filter:
    """Build an ``all`` filter; raises FilterError for a non-array or an empty array."""
    return AllFilter(_children("all", value, path, nested))


def compile_any(
    value: object, path: str, nested: NestedCompiler, observer: BudgetObserver | None = None
) -> Filter:
    """Build an ``any`` filter; raises FilterError for a non-array or an empty array."""
    return AnyFilter(_children("any", value, path, nested))


def compile_not(
    value: object, path: str, nested: NestedCompiler, observer: BudgetObserver | None = None
) -> Filter:
    """Build a ``not`` filter; its value must be exactly one filter expression (an object).

    An array, even of one element, is rejected: the spec says "one nested filter expression".
    """
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        raise FilterError(path, "'not' takes exactly one filter expression (an object), not an array")
    return NotFilter(nested(value, path))
