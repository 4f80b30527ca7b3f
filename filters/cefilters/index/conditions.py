"""A subscription's conditions as compiled (``source``, ``types``, ``filters``), and their explanation.

The index keeps them in its plan so that :meth:`SubscriptionIndex.explain` reports each
condition of the subscription as written, located by its JSON Pointer, while ``match`` keeps using
the plan's anchors and residual. Both are built from the same compiled objects: the plan's
conjuncts are these filters (or their single-attribute parts), so the two verdicts agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..base import Event, Filter, MatchAll, canonical_string
from ..checks import Check, Explanation
from ..dialects.exact import ExactFilter
from ..dialects.logical import FilterArray
from ..wording import explain_filter, quote

__all__ = ["TypesFilter", "explain_conditions"]

_TYPES_SHOWN: Final = 5
"""How many listed types a detail names before it says how many more there are."""


class TypesFilter:
    """The subscription's top-level ``types``: the event's ``type`` is one of the listed values."""

    __slots__ = ("types",)

    def __init__(self, types: Sequence[str]) -> None:
        self.types = frozenset(types)

    def matches(self, event: Event) -> bool:
        """Whether the event's type (as its canonical string) is listed."""
        value = event.get("type")
        return (value if type(value) is str else canonical_string(value)) in self.types

    def explain(self, event: Event, pointer: str) -> list[Check]:
        """Whether the type is listed, naming the type and (some of) the list."""
        value = event.get("type")
        actual = value if type(value) is str else canonical_string(value)
        matched = actual in self.types
        if not self.types:
            detail = "types is an empty list, which admits no event"
        elif value is None:
            detail = "the event has no type"
        elif actual is None:
            detail = f"type is a {type(value).__name__} with no CloudEvents string form"
        elif matched:
            detail = f"type {quote(actual)} is listed"
        else:
            listed = sorted(self.types)
            shown = ", ".join(quote(t) for t in listed[:_TYPES_SHOWN])
            more = f" and {len(listed) - _TYPES_SHOWN} more" if len(listed) > _TYPES_SHOWN else ""
            detail = f"type {quote(actual)} is not one of {shown}{more}"
        return [Check(pointer, matched, detail)]

    def __repr__(self) -> str:
        return f"TypesFilter({sorted(self.types)!r})"


def explain_conditions(
    filter_: Filter, source: str | None, types: TypesFilter | None, event: Event
) -> Explanation:
    """Every condition's check in document order; matched when every top-level one holds.

    Args:
        filter_: the compiled ``filters`` array (:class:`FilterArray` for two or more
            expressions, the expression itself for one, ``MatchAll`` for none).
        source: the ``source`` constraint.
        types: the ``types`` constraint.
        event: the event to explain.
    """
    parts: list[tuple[Filter, str]] = []
    if source is not None:
        parts.append((ExactFilter((("source", source),)), "/source"))
    if types is not None:
        parts.append((types, "/types"))
    if isinstance(filter_, FilterArray):
        parts.extend((child, f"/filters/{i}") for i, child in enumerate(filter_.children))
    elif not isinstance(filter_, MatchAll):
        parts.append((filter_, "/filters/0"))
    top: list[Check] = []
    checks: list[Check] = []
    for condition, pointer in parts:
        explained = explain_filter(condition, event, pointer)
        top.append(explained[0])
        checks.extend(explained)
    return Explanation(all(check.matched for check in top), tuple(checks))
