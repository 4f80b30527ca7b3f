"""The per-attribute lookup tables of the subscription index.

For one attribute, three maps from a string to the keys stored under it:

- exact: the attribute's value itself; one dict lookup per event.
- prefix: the stored prefixes, grouped by their first ``width`` characters, where ``width`` is the
  shortest stored prefix's length. An event value first finds its group with one lookup of
  ``value[:width]`` (every prefix of the value starts with those characters), then probes its own
  prefixes at the distinct lengths present in that group only. The cost is therefore the number of
  distinct lengths among prefixes sharing the value's first characters, usually one to three,
  rather than the number of prefixes.
- suffix: the same on the value's endings.

Every map has two halves: *sure* keys match as soon as they are found (no residual), *check* keys
are candidates whose residual filter must still pass.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["AffixSide", "AttributeTable", "ExactSide"]

K = TypeVar("K", bound=Hashable)


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

    def __bool__(self) -> bool:
        return bool(self.sure or self.check)


class _Group:
    """The distinct lengths (sorted, with use counts) of the stored strings sharing a group key."""

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
    """Prefixes (or, with ``suffix=True``, suffixes) -> keys, grouped as the module explains."""

    __slots__ = ("_suffix", "groups", "width")

    def __init__(self, *, suffix: bool) -> None:
        super().__init__()
        self._suffix = suffix
        self.width = 0  # 0 while empty
        self.groups: dict[str, _Group] = {}

    def _group_key(self, value: str) -> str:
        return value[len(value) - self.width :] if self._suffix else value[: self.width]

    def add(self, value: str, key: K, sure: bool) -> None:
        """Store ``key`` under the prefix (suffix) ``value``."""
        new = value not in self.sure and value not in self.check
        super().add(value, key, sure)
        if not new:
            return
        if not self.width or len(value) < self.width:
            self._regroup(len(value))
        else:
            self._group(self._group_key(value)).add(len(value))

    def remove(self, value: str, key: K, sure: bool) -> bool:
        """Forget ``key`` under ``value``; returns whether ``value`` is now unused."""
        unused = super().remove(value, key, sure)
        if unused:
            group_key = self._group_key(value)
            group = self.groups[group_key]
            group.remove(len(value))
            if not group.lengths:
                del self.groups[group_key]
            if not self.groups:
                self.width = 0
        return unused

    def _group(self, group_key: str) -> _Group:
        group = self.groups.get(group_key)
        if group is None:
            self.groups[group_key] = group = _Group()
        return group

    def _regroup(self, width: int) -> None:
        """Rebuild the groups for a smaller width; it only shrinks, so this happens rarely."""
        self.width = width
        self.groups = {}
        for value in {*self.sure, *self.check}:
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
        # The hot path of matching: empty maps are skipped without a lookup.
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
        width = side.width
        if width and width <= size:
            group = side.groups.get(value[:width])
            if group is not None:
                sure, check = side.sure, side.check
                for length in group.lengths:
                    if length > size:
                        break
                    head = value[:length]
                    if sure:
                        found = sure.get(head)
                        if found:
                            matched |= found
                    if check:
                        found = check.get(head)
                        if found:
                            candidates.append(found)
        side = self.suffix
        width = side.width
        if width and width <= size:
            group = side.groups.get(value[size - width :])
            if group is not None:
                sure, check = side.sure, side.check
                for length in group.lengths:
                    if length > size:
                        break
                    tail = value[size - length :]
                    if sure:
                        found = sure.get(tail)
                        if found:
                            matched |= found
                    if check:
                        found = check.get(tail)
                        if found:
                            candidates.append(found)

    def side(self, kind: str) -> ExactSide[K]:
        """The map for an anchor kind (``exact``, ``prefix`` or ``suffix``)."""
        if kind == "exact":
            return self.exact
        return self.prefix if kind == "prefix" else self.suffix

    def __bool__(self) -> bool:
        return bool(self.exact or self.prefix or self.suffix)
