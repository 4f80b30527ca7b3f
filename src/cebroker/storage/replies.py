"""Announcements of committed replies: events that carry ``inreplyto`` (docs/replies.md).

A producer waiting on ``POST /events`` with ``Prefer: wait`` may be served by another instance
than the one that ingests the reply. The ingesting instance announces every committed reply on
the storage's :class:`ReplyChannel`; each instance watches it and hands what it hears to its
waiting requests. One instance (SQLite, memory) announces to itself
(:class:`LocalReplyChannel`); PostgreSQL announces through ``NOTIFY cebroker_replies``
(:mod:`.postgres.replies`). An announcement is a hint for waiters only: the event itself is in
the log and the archive like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

log = logging.getLogger("cebroker.storage")

#: Called with each reply heard (the event in the JSON form).
ReplyHandler = Callable[[Mapping[str, Any]], None]


class ReplyChannel(Protocol):
    """Where committed replies are announced to every instance."""

    async def announce(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Tell every instance (this one included) that ``events`` were committed."""
        ...

    def watch(self, handler: ReplyHandler) -> Callable[[], None]:
        """Call ``handler`` with every reply announced; returns the call that stops it."""
        ...


class Handlers:
    """The handlers of a channel, each called on its own (one failing stops no other)."""

    def __init__(self) -> None:
        self._handlers: list[ReplyHandler] = []

    def add(self, handler: ReplyHandler) -> Callable[[], None]:
        """Add ``handler``; returns the call that removes it."""
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler) if handler in self._handlers else None

    def tell(self, event: Mapping[str, Any]) -> None:
        """Call every handler with ``event``."""
        for handler in list(self._handlers):
            try:
                handler(event)
            except Exception:
                log.exception("a reply handler failed")


class LocalReplyChannel:
    """The channel of a storage used by one instance: announcing calls the handlers at once."""

    def __init__(self) -> None:
        self._handlers = Handlers()

    async def announce(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Hand ``events`` to this instance's handlers."""
        for event in events:
            self._handlers.tell(event)

    def watch(self, handler: ReplyHandler) -> Callable[[], None]:
        """Call ``handler`` with every reply announced."""
        return self._handlers.add(handler)
