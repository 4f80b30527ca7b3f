"""Per-destination preparation, done once: parsing the sink, the settings and the credential.

A :class:`~ceprotocols.sender.Destination` is immutable, and the broker keeps one per
subscription revision, so its parsed form can be remembered by identity. The cache holds the
destination itself, so an id is never reused while its entry exists; it is bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ceprotocols.sender import Destination

P = TypeVar("P")


class PreparedCache(Generic[P]):
    """``prepare(destination)`` results by destination identity (``prepare`` may raise; errors
    are not cached)."""

    def __init__(self, prepare: Callable[[Destination], P], size: int = 1024) -> None:
        self._prepare = prepare
        self._size = size
        self._entries: dict[int, tuple[Destination, P]] = {}

    def get(self, destination: Destination) -> P:
        """The prepared form of ``destination``."""
        hit = self._entries.get(id(destination))
        if hit is not None and hit[0] is destination:
            return hit[1]
        value = self._prepare(destination)
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[id(destination)] = (destination, value)
        return value
