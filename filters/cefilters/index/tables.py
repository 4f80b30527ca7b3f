"""The per-attribute lookup tables of the subscription index.

For one attribute, three maps from a string to the keys stored under it:

- exact: the attribute's value itself; one dict lookup per event.
- prefix: short prefixes (under ``SHORT_LIMIT`` characters) are probed at each distinct stored
  length, at most ``SHORT_LIMIT - 1`` lookups. Longer ones are grouped by their first ``width``
  characters, ``width`` being the shortest long prefix's length: an event value finds its group
  with one lookup of ``value[:width]`` (every long prefix of the value starts with those
  characters), then probes its own prefixes at the distinct lengths present in that group only.
  The cost is the number of distinct lengths among prefixes sharing the value's first characters,
  usually one to three, rather than the number of prefixes; and one short prefix such as ``/``
  does not collapse the groups.
- suffix: the same on the value's endings.

Every map has two halves: *sure* keys match as soon as they are found (no residual), *check* keys
are candidates whose residual filter must still pass.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import Final, Generic, TypeVar

__all__ = ["SHORT_LIMIT", "AffixSide", "AttributeTable", "ExactSide"]

K = TypeVar("K", bound=Hashable)

SHORT_LIMIT: Final = 8
"""Prefixes and suffixes shorter than this are probed directly rather than grouped."""


class ExactSide(Generic[K]):
    """Value -> keys, split into sure and check keys."""

    __slots__ = ("check", "sure")

    def __init__(self) -> None:
        self.sure: dict[str, set[K]] = {}
        self.check: dict[str, set[K]] = {}

    def add(self, value: str, key: K, sure: bool) -> None:
        """Store ``key`` under ``value``."""
        table = self.sure if sure else self.check
        keys = table.get(value)
        if keys is None:
            table[value] = keys = set()
        keys.add(key)

    def remove(self, value: str, key: K, sure: bool) -> bool:
        """Forget ``key`` under ``value``; returns whether ``value`` is now unused."""
        table = self.sure if sure else self.check
        keys = table[value]
        keys.remove(key)
        if keys:
            return False
        del table[value]
        return value not in self.sure and value not in self.check

    def size(self, value: str) -> int:
        """How many keys are stored under ``value``."""
        return len(self.sure.get(value, ())) + len(self.check.get(value, ()))

    def collect(self, value: str, matched: set[K], candidates: list[set[K]]) -> None:
        """Add the sure keys stored under ``value`` to ``matched``; append its check keys."""
        found = self.sure.get(value)
        if found:
            matched |= found
        found = self.check.get(value)
        if found:
            candidates.append(found)

    def __bool__(self) -> bool:
        return bool(self.sure or self.check)


class _Lengths:
    """Distinct lengths of stored strings, sorted, with use counts."""

    __slots__ = ("lengths", "uses")

    def __init__(self) -> None:
        self.lengths: list[int] = []
        self.uses: dict[int, int] = {}

    def add(self, length: int) -> None:
        uses = self.uses.get(length, 0)
        if not uses:
            bisect.insort(self.lengths, length)
        self.uses[length] = uses + 1

    def remove(self, length: int) -> None:
        uses = self.uses[length] - 1
        if uses:
            self.uses[length] = uses
        else:
            del self.uses[length]
            del self.lengths[bisect.bisect_left(self.lengths, length)]


class AffixSide(ExactSide[K]):
    """Prefixes (or, with ``suffix=True``, suffixes) -> keys, laid out as the module explains."""

    __slots__ = ("_limit", "_suffix", "groups", "short", "width")

    def __init__(self, *, suffix: bool) -> None:
        super().__init__()
        self._suffix = suffix
        self._limit = SHORT_LIMIT
        self.short = _Lengths()  # lengths below the limit
        self.width = 0  # group key length; 0 while there is no long string
        self.groups: dict[str, _Lengths] = {}

    def _group_key(self, value: str) -> str:
        return value[len(value) - self.width :] if self._suffix else value[: self.width]

    def add(self, value: str, key: K, sure: bool) -> None:
        """Store ``key`` under the prefix (suffix) ``value``."""
        new = value not in self.sure and value not in self.check
        super().add(value, key, sure)
        if not new:
            return
        size = len(value)
        if size < self._limit:
            self.short.add(size)
        elif not self.width or size < self.width:
            self._regroup(size)
        else:
            self._group(self._group_key(value)).add(size)

    def remove(self, value: str, key: K, sure: bool) -> bool:
        """Forget ``key`` under ``value``; returns whether ``value`` is now unused."""
        unused = super().remove(value, key, sure)
        if unused:
            size = len(value)
            if size < self._limit:
                self.short.remove(size)
                return True
            group_key = self._group_key(value)
            group = self.groups[group_key]
            group.remove(size)
            if not group.lengths:
                del self.groups[group_key]
                if not self.groups:
                    self.width = 0
        return unused

    def collect(self, value: str, matched: set[K], candidates: list[set[K]]) -> None:
        """Add the sure keys of every stored prefix (suffix) of ``value``; append check keys."""
        # The hottest loop of matching: the short lengths, then those of the value's group, are
        # probed in one nested loop rather than over a concatenated list or via a helper call.
        size = len(value)
        sure, check, suffix = self.sure, self.check, self._suffix
        short = self.short.lengths
        width = self.width
        group = None
        if width and width <= size:
            group = self.groups.get(value[size - width :] if suffix else value[:width])
        for lengths in (short,) if group is None else (short, group.lengths):
            for length in lengths:
                if length > size:
                    break
                part = value[size - length :] if suffix else value[:length]
                if sure:
                    found = sure.get(part)
                    if found:
                        matched |= found
                if check:
                    found = check.get(part)
                    if found:
                        candidates.append(found)

    def _group(self, group_key: str) -> _Lengths:
        group = self.groups.get(group_key)
        if group is None:
            self.groups[group_key] = group = _Lengths()
        return group

    def _regroup(self, width: int) -> None:
        """Rebuild the groups for a smaller width; widths only shrink, so this is rare."""
        self.width = width
        self.groups = {}
        for value in {*self.sure, *self.check}:
            if len(value) >= self._limit:
                self._group(self._group_key(value)).add(len(value))


class AttributeTable(Generic[K]):
    """The exact, prefix and suffix maps of one attribute."""

    __slots__ = ("exact", "prefix", "suffix")

    def __init__(self) -> None:
        self.exact: ExactSide[K] = ExactSide()
        self.prefix: AffixSide[K] = AffixSide(suffix=False)
        self.suffix: AffixSide[K] = AffixSide(suffix=True)

    def collect(self, value: str, matched: set[K], candidates: list[set[K]]) -> None:
        """Add the sure keys ``value`` reaches to ``matched`` and append its check-key sets."""
        # Emptiness is tested on the dicts directly: __bool__ would cost a call per side.
        exact = self.exact
        if exact.sure:
            found = exact.sure.get(value)
            if found:
                matched |= found
        if exact.check:
            found = exact.check.get(value)
            if found:
                candidates.append(found)
        side = self.prefix
        if side.sure or side.check:
            side.collect(value, matched, candidates)
        side = self.suffix
        if side.sure or side.check:
            side.collect(value, matched, candidates)

    def side(self, kind: str) -> ExactSide[K]:
        """The map for an anchor kind (``exact``, ``prefix`` or ``suffix``)."""
        if kind == "exact":
            return self.exact
        return self.prefix if kind == "prefix" else self.suffix

    def __bool__(self) -> bool:
        return bool(self.exact or self.prefix or self.suffix)
