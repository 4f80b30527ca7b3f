"""Request-reply: ``POST /events`` with ``Prefer: wait=<seconds>`` (RFC 7240) answers with the
first reply to the published event instead of 202 (docs/replies.md#request-reply).

Correlation: a reply is any event committed after the request was registered whose
``inreplyto`` extension equals the request event's ``id`` (the broker sets it on a sink's reply
that lacks it; a producer replying on its own sets it). Every committed event carrying
``inreplyto`` is announced on the storage's
:class:`~cebroker.storage.replies.ReplyChannel`, so the instance holding the request hears of a
reply ingested by another instance (PostgreSQL: ``NOTIFY``). Waiting is a future on the event
loop with a timeout: it holds no thread and no database connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cebroker.pipeline.dispatch.replies import IN_REPLY_TO
from cebroker.storage.replies import ReplyChannel

log = logging.getLogger("cebroker.pipeline")


def parse_wait(prefer: str | None) -> float | None:
    """The seconds of a ``wait`` preference in ``Prefer`` header values (None: no usable one).

    RFC 7240: preferences are comma-separated, parameters after ``;``; names are case-insensitive;
    a preference the server cannot read is ignored, not an error."""
    if not prefer:
        return None
    for part in prefer.split(","):
        name, _, value = part.split(";", 1)[0].strip().partition("=")
        if name.strip().lower() != "wait":
            continue
        text = value.strip().strip('"')
        if text.isdigit() and int(text) > 0:
            return float(int(text))
        return None
    return None


class ReplyWaiters:
    """Requests waiting for their replies, and the announcement of committed replies."""

    def __init__(self, channel: ReplyChannel, *, max_wait: float) -> None:
        self._channel = channel
        self.max_wait = max_wait
        self._waiting: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._unwatch = channel.watch(self._heard)

    @property
    def waiting(self) -> int:
        """Requests waiting now."""
        return sum(len(futures) for futures in self._waiting.values())

    @contextlib.contextmanager
    def expect(self, request_id: str) -> Iterator[asyncio.Future[dict[str, Any]]]:
        """A future that gets the first reply to ``request_id`` heard while the block runs
        (registered before the request is ingested, so that no reply can come first)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(request_id, []).append(future)
        try:
            yield future
        finally:
            futures = self._waiting.get(request_id, [])
            if future in futures:
                futures.remove(future)
            if not futures:
                self._waiting.pop(request_id, None)
            future.cancel()

    async def announce(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Announce the committed ``events`` that are replies (carry ``inreplyto``). A failure
        is logged: the events are committed; only a waiting request may miss them (504)."""
        replies = [event for event in events if IN_REPLY_TO in event]
        if not replies:
            return
        try:
            await self._channel.announce(replies)
        except Exception:
            log.warning("announcing %d replies failed; a request waiting for one may time out", len(replies))

    def _heard(self, event: Mapping[str, Any]) -> None:
        futures = self._waiting.get(str(event.get(IN_REPLY_TO)))
        for future in futures or ():
            if not future.done():
                future.set_result(dict(event))
