"""``GET /subscriptions/{id}/tail``: the events a subscription matches, live, as Server-Sent Events.

The stream opens with ``event: ready`` (the watch is registered: every event committed from now on
is shown), then one ``event: cloudevent`` per matched event whose ``data`` is the event in the
JSON format and whose ``id`` is the id of the event's trace (32 hex digits; empty when the event
has none: see :mod:`cebroker.pipeline.tail`), and ``event: dropped`` with ``{"dropped": n}`` when
the reader fell behind and ``n`` copies were skipped. It ends when the subscription is deleted
or the broker stops. Comments (``: ping``) keep idle connections open through proxies.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import orjson
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import NotFound
from cebroker.pipeline.tail import TailHub
from cebroker.subscription import Subscription
from cebroker.web.access import principal_of

#: Seconds between keep-alive comments on an idle stream.
PING_INTERVAL = 15


class TailApi:
    """Serves the live tail from a :class:`TailHub`; ``lookup`` finds a stored subscription."""

    def __init__(self, hub: TailHub, lookup: Callable[[str], Awaitable[Subscription | None]]) -> None:
        self._hub = hub
        self._lookup = lookup

    def routes(self) -> Sequence[BaseRoute]:
        """``GET /subscriptions/{id}/tail``."""
        return [Route("/subscriptions/{id}/tail", self.tail, methods=["GET"])]

    async def tail(self, request: Request) -> Response:
        """Stream the subscription's matched events until it is deleted or the client leaves."""
        subscription = str(request.path_params["id"])
        found = await self._lookup(subscription)
        # Another tenant's subscription is answered exactly as one that does not exist.
        if found is None or not principal_of(request).sees(found.tenant):
            raise NotFound(f"no subscription {subscription[:64]!r}")
        return EventSourceResponse(
            self._stream(subscription),
            ping=PING_INTERVAL,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, subscription: str) -> AsyncIterator[ServerSentEvent]:
        with self._hub.watch(subscription) as watcher:
            yield ServerSentEvent(data=_json({"subscription": subscription}), event="ready")
            while True:
                tailed = await watcher.next()
                if tailed is None:
                    return
                if watcher.dropped:
                    yield ServerSentEvent(data=_json({"dropped": watcher.dropped}), event="dropped")
                    watcher.dropped = 0
                # The message's id is the event's trace id, empty when it has none (an SSE id
                # carries over to the next message unless reset); the data stays the event.
                yield ServerSentEvent(data=_json(tailed.event), event="cloudevent", id=tailed.trace_id or "")


def _json(doc: Any) -> str:
    return orjson.dumps(doc).decode()
