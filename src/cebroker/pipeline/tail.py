"""Live copies of the events each subscription matched, for whoever watches it (the console's
live tail and ``cebroker tail``).

A watcher gets only events committed after it started watching, through a bounded queue: a
watcher that reads too slowly loses the oldest copies and is told how many, so a stalled
browser tab never holds memory or slows ingest. Nothing here is durable, and delivery does not
depend on it: a tail is a view, not a consumer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from cebroker.storage.deliveries import Appended

#: Copies a watcher may have waiting before the oldest are dropped.
WATCHER_QUEUE = 256


class Watcher:
    """One reader of one subscription's matched events."""

    def __init__(self, capacity: int = WATCHER_QUEUE) -> None:
        self._items: deque[Mapping[str, Any]] = deque(maxlen=capacity)
        self._ready = asyncio.Event()
        self._closed = False
        #: Copies dropped since the last :meth:`next` because this watcher fell behind.
        self.dropped = 0

    def offer(self, event: Mapping[str, Any]) -> None:
        """Queue a copy; the oldest waiting copy goes when the queue is full."""
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(event)
        self._ready.set()

    def close(self) -> None:
        """End the watch (the subscription was deleted, or the broker stops)."""
        self._closed = True
        self._ready.set()

    async def next(self) -> Mapping[str, Any] | None:
        """The next matched event, waiting for one; None once the watch has ended."""
        while not self._items:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class TailHub:
    """Watchers by subscription id. Used on the event loop only, like the matcher."""

    def __init__(self) -> None:
        self._watchers: dict[str, set[Watcher]] = {}

    @property
    def active(self) -> bool:
        """Whether anyone watches at all (ingest skips :meth:`publish` otherwise)."""
        return bool(self._watchers)

    @contextmanager
    def watch(self, subscription: str, capacity: int = WATCHER_QUEUE) -> Iterator[Watcher]:
        """A watcher of ``subscription`` for the duration of the block."""
        watcher = Watcher(capacity)
        self._watchers.setdefault(subscription, set()).add(watcher)
        try:
            yield watcher
        finally:
            watchers = self._watchers.get(subscription)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._watchers[subscription]

    def publish(self, events: Sequence[Mapping[str, Any]], written: Sequence[Appended | None]) -> None:
        """Hand each committed event to the watchers of the subscriptions it matched (duplicates,
        which are not delivered again, are not shown again either)."""
        for event, appended in zip(events, written, strict=True):
            if appended is None:
                continue
            for _, subscription in appended.deliveries:
                for watcher in self._watchers.get(subscription, ()):
                    watcher.offer(event)

    def end(self, subscription: str) -> None:
        """End every watch of ``subscription`` (it was deleted)."""
        for watcher in self._watchers.pop(subscription, set()):
            watcher.close()

    def end_all(self) -> None:
        """End every watch (the broker stops)."""
        for subscription in list(self._watchers):
            self.end(subscription)
