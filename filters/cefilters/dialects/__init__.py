"""The filter dialects and the registry that names them.

``DIALECTS`` is the explicit table from a dialect's JSON name to its compiler; the seven dialects of
the Subscriptions API plus the ``cel`` extension.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ..base import Filter
from ..observer import BudgetObserver
from .cel import compile_cel
from .contract import DialectCompiler, NestedCompiler
from .exact import compile_exact
from .logical import compile_all, compile_any, compile_not
from .prefix import compile_prefix
from .sql import compile_sql
from .suffix import compile_suffix

__all__ = ["DIALECTS", "DialectCompiler", "NestedCompiler"]


def _leaf(compile_value: Callable[[object, str], Filter]) -> DialectCompiler:
    """Adapts a dialect that has no nested expressions to the registry's signature."""

    def compile_leaf(
        value: object, path: str, nested: NestedCompiler, observer: BudgetObserver | None, /
    ) -> Filter:
        return compile_value(value, path)

    return compile_leaf


def _bounded(compile_value: Callable[[object, str, BudgetObserver | None], Filter]) -> DialectCompiler:
    """Adapts an expression dialect (which has a budget, and tells the observer) to the registry."""

    def compile_bounded(
        value: object, path: str, nested: NestedCompiler, observer: BudgetObserver | None, /
    ) -> Filter:
        return compile_value(value, path, observer)

    return compile_bounded


DIALECTS: Final[dict[str, DialectCompiler]] = {
    "exact": _leaf(compile_exact),
    "prefix": _leaf(compile_prefix),
    "suffix": _leaf(compile_suffix),
    "all": compile_all,
    "any": compile_any,
    "not": compile_not,
    "sql": _bounded(compile_sql),
    "cel": _bounded(compile_cel),
}
