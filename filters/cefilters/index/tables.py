"""The per-attribute lookup tables of the subscription index.

For one attribute, three maps from a string to the keys stored under it:

- exact: the attribute's value itself, one dict lookup per event;
- prefix: a prefix; the event's value is looked up by its prefixes of each length that some stored
  prefix has (``lengths``), so the cost is the number of distinct prefix lengths, not of prefixes;
- suffix: the same on the value's endings.

Each map has two sides: *sure* keys match as soon as they are found (no residual), *check* keys are
candidates whose residual filter must still pass.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["AttributeTable", "Side"]

K = TypeVar("K", bound=Hashable)


class Side(Generic[K]):
    """One map of an attribute table: string -> keys, split into sure and check keys."""

    __slots__ = ("_length_uses", "check", "lengths", "sure")

    def __init__(self) -> None:
        self.sure: dict[str, set[K]] = {}
        self.check: dict[str, set[K]] = {}
        # Sorted distinct lengths of the stored strings with their use counts (prefix/suffix only).
        self.lengths: list[int] = []
        self._length_uses: dict[int, int] = {}

    def add(self, value: str, key: K, sure: bool) -> None:
        """Store ``key`` under ``value``."""
        table = self.sure if sure else self.check
        keys = table.get(value)
        if keys is None:
            table[value] = keys = set()
        keys.add(key)
        uses = self._length_uses.get(len(value), 0)
        if uses == 0:
            bisect.insort(self.lengths, len(value))
        self._length_uses[len(value)] = uses + 1

    def remove(self, value: str, key: K, sure: bool) -> None:
        """Forget ``key`` under ``value`` (it must have been added with the same arguments)."""
        table = self.sure if sure else self.check
        keys = table[value]
        keys.remove(key)
        if not keys:
            del table[value]
        uses = self._length_uses[len(value)] - 1
        if uses:
            self._length_uses[len(value)] = uses
        else:
            del self._length_uses[len(value)]
            del self.lengths[bisect.bisect_left(self.lengths, len(value))]

    def __bool__(self) -> bool:
        return bool(self.sure or self.check)


class AttributeTable(Generic[K]):
    """The exact, prefix and suffix maps of one attribute."""

    __slots__ = ("exact", "prefix", "suffix")

    def __init__(self) -> None:
        self.exact: Side[K] = Side()
        self.prefix: Side[K] = Side()
        self.suffix: Side[K] = Side()

    def collect(self, value: str, matched: set[K], candidates: list[set[K]]) -> None:
        """Add the sure keys ``value`` reaches to ``matched`` and append its check-key sets."""
        exact = self.exact
        if exact.sure:
            found = exact.sure.get(value)
            if found:
                matched |= found
        if exact.check:
            found = exact.check.get(value)
            if found:
                candidates.append(found)
        size = len(value)
        side = self.prefix
        if side.lengths:
            sure, check = side.sure, side.check
            for length in side.lengths:
                if length > size:
                    break
                head = value[:length]
                found = sure.get(head)
                if found:
                    matched |= found
                found = check.get(head)
                if found:
                    candidates.append(found)
        side = self.suffix
        if side.lengths:
            sure, check = side.sure, side.check
            for length in side.lengths:
                if length > size:
                    break
                tail = value[size - length :]
                found = sure.get(tail)
                if found:
                    matched |= found
                found = check.get(tail)
                if found:
                    candidates.append(found)

    def side(self, kind: str) -> Side[K]:
        """The map for an anchor kind (``exact``, ``prefix`` or ``suffix``)."""
        if kind == "exact":
            return self.exact
        return self.prefix if kind == "prefix" else self.suffix

    def __bool__(self) -> bool:
        return bool(self.exact or self.prefix or self.suffix)
