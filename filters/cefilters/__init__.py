"""cefilters: CloudEvents Subscriptions API filters (exact, prefix, suffix, all, any, not, sql,
and the ``cel`` extension), CloudEvents SQL v1, and a sublinear subscription index.

No IO and no dependency on the broker service.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FilterError", "compile"]

DIALECTS = ("exact", "prefix", "suffix", "all", "any", "not", "sql", "cel")


class FilterError(ValueError):
    """An invalid filter; ``path`` is a JSON Pointer into the filters array (``/0/all/1/sql``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


class Filter:
    """A compiled filter expression (placeholder until the engine lands)."""

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether ``event`` passes the filter."""
        raise NotImplementedError


def compile(filters: Sequence[Mapping[str, Any]]) -> Filter:
    """Compile a Subscriptions API ``filters`` array (an implicit ``all``)."""
    for i, f in enumerate(filters):
        if not isinstance(f, Mapping) or len(f) != 1:
            raise FilterError(f"/{i}", "a filter is an object with exactly one dialect")
        (dialect,) = f
        if dialect not in DIALECTS:
            raise FilterError(f"/{i}/{dialect}", f"unknown dialect {dialect!r}")
    return Filter()
