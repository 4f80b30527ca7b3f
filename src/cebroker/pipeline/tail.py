"""Live copies of the events each subscription matched, for whoever watches it (the console's
live tail and ``cebroker tail``).

A watcher gets only events committed after it started watching, through a bounded queue: a
watcher that reads too slowly loses the oldest copies and is told how many, so a stalled
browser tab never holds memory or slows ingest. Nothing here is durable, and delivery does not
depend on it: a tail is a view, not a consumer.

Each copy comes with the id of the trace the event belongs to: its publish span's when tracing is
on, else the one its own ``traceparent`` attribute names (None when neither), so a line of the
tail leads to the event's trace.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cebroker.storage.deliveries import Appended

#: Copies a watcher may have waiting before the oldest are dropped.
WATCHER_QUEUE = 256


@dataclass(frozen=True, slots=True)
class Tailed:
    """One matched event as a watcher gets it, with the id of its trace (32 hex digits)."""

    event: Mapping[str, Any]
    trace_id: str | None = None


def trace_id_of(event: Mapping[str, Any], stored: str | None) -> str | None:
    """The trace id of a stored trace context (``00-<trace id>-...``), else of the event's own
    ``traceparent`` attribute; None when neither names one."""
    for parent in (stored, event.get("traceparent")):
        if isinstance(parent, str) and len(parent) >= 35 and parent[2] == "-" and parent[35:36] == "-":
            return parent[3:35]
    return None


class Watcher:
    """One reader of one subscription's matched events."""

    def __init__(self, capacity: int = WATCHER_QUEUE) -> None:
        self._items: deque[Tailed] = deque(maxlen=capacity)
        self._ready = asyncio.Event()
        self._closed = False
        #: Copies dropped since the last :meth:`next` because this watcher fell behind.
        self.dropped = 0

    def offer(self, event: Tailed) -> None:
        """Queue a copy; the oldest waiting copy goes when the queue is full."""
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(event)
        self._ready.set()

    def close(self) -> None:
        """End the watch (the subscription was deleted, or the broker stops)."""
        self._closed = True
        self._ready.set()

    async def next(self) -> Tailed | None:
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

    def publish(
        self,
        events: Sequence[Mapping[str, Any]],
        written: Sequence[Appended | None],
        traces: Sequence[str | None] | None = None,
    ) -> None:
        """Hand each committed event to the watchers of the subscriptions it matched (duplicates,
        which are not delivered again, are not shown again either); ``traces``: each event's
        stored trace context, when traced."""
        for index, (event, appended) in enumerate(zip(events, written, strict=True)):
            if appended is None:
                continue
            shown: Tailed | None = None
            for _, subscription in appended.deliveries:
                for watcher in self._watchers.get(subscription, ()):
                    if shown is None:
                        shown = Tailed(
                            event, trace_id_of(event, traces[index] if traces is not None else None)
                        )
                    watcher.offer(shown)

    def end(self, subscription: str) -> None:
        """End every watch of ``subscription`` (it was deleted)."""
        for watcher in self._watchers.pop(subscription, set()):
            watcher.close()

    def end_all(self) -> None:
        """End every watch (the broker stops)."""
        for subscription in list(self._watchers):
            self.end(subscription)
