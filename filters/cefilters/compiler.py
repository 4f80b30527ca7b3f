"""``compile``: a Subscriptions API ``filters`` array to one :class:`~cefilters.base.Filter`.

Total: every input either compiles to a filter that implements all of it, or raises
:class:`~cefilters.errors.FilterError` naming the first offending element; nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from .base import MATCH_ALL, Filter
from .dialects import DIALECTS
from .dialects.logical import FilterArray
from .errors import FilterError, pointer_token
from .observer import BudgetObserver

__all__ = ["MAX_DEPTH", "compile", "compile_expression"]

MAX_DEPTH: Final = 32
"""Deepest accepted nesting of ``all``/``any``/``not``; deeper input is rejected with a
FilterError rather than risking a RecursionError at compile or match time."""


def compile(filters: Sequence[Mapping[str, object]], *, observer: BudgetObserver | None = None) -> Filter:
    """Compile a ``filters`` array; the array is an implicit ``all``, and an empty one matches all.

    Args:
        filters: the subscription's ``filters`` value, as decoded from JSON.
        observer: told of every evaluation of a ``cel`` or ``sql`` expression stopped by its
            budget (which counts as "no match").

    Returns:
        A filter whose ``matches(event)`` never raises.

    Raises:
        FilterError: the input is invalid; ``path`` is a JSON Pointer into ``filters``
            (``""`` for the array itself, ``/0/all/1/sql`` for a nested element).
    """
    if not isinstance(filters, Sequence) or isinstance(filters, str | bytes):
        raise FilterError("", "filters must be an array of filter expressions")
    compiled = tuple(compile_expression(item, f"/{i}", 0, observer) for i, item in enumerate(filters))
    if not compiled:
        return MATCH_ALL
    if len(compiled) == 1:
        return compiled[0]
    return FilterArray(compiled)


def compile_expression(
    expression: object, path: str, depth: int = 0, observer: BudgetObserver | None = None
) -> Filter:
    """Compile one filter expression, ``{"<dialect>": <value>}``, located at ``path``."""
    if depth > MAX_DEPTH:
        raise FilterError(path, f"filter expressions are nested more than {MAX_DEPTH} levels deep")
    if not isinstance(expression, Mapping):
        raise FilterError(path, "a filter expression is an object with exactly one dialect key")
    if len(expression) != 1:
        raise FilterError(path, f"a filter expression has exactly one dialect key, found {len(expression)}")
    ((dialect, value),) = expression.items()
    member = f"{path}/{pointer_token(dialect) if isinstance(dialect, str) else dialect}"
    compile_dialect = DIALECTS.get(dialect) if isinstance(dialect, str) else None
    if compile_dialect is None:
        known = ", ".join(sorted(DIALECTS))
        raise FilterError(member, f"unsupported filter dialect {dialect!r} (supported: {known})")

    def nested(child: object, child_path: str, /) -> Filter:
        return compile_expression(child, child_path, depth + 1, observer)

    return compile_dialect(value, member, nested, observer)
