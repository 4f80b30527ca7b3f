"""The contract every dialect's compiler follows, so that the registry can hold any of them."""

from __future__ import annotations

from typing import Protocol

from ..base import Filter
from ..observer import BudgetObserver

__all__ = ["DialectCompiler", "NestedCompiler"]


class NestedCompiler(Protocol):
    """Compiles one nested filter expression (``{dialect: value}``) found at ``path``."""

    def __call__(self, expression: object, path: str, /) -> Filter: ...


class DialectCompiler(Protocol):
    """Builds a dialect's filter from its JSON value.

    Args:
        value: the dialect's value, e.g. the object of ``{"exact": {...}}``.
        path: JSON Pointer of ``value`` in the filters array, for errors.
        nested: compiles nested expressions (used by ``all``, ``any``, ``not``).
        observer: told of evaluations over their budget (``cel``, ``sql``), or ``None``.

    Raises:
        FilterError: the value is invalid.
    """

    def __call__(
        self, value: object, path: str, nested: NestedCompiler, observer: BudgetObserver | None, /
    ) -> Filter: ...
