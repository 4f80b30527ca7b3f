"""LISTEN/NOTIFY: one connection that hears what other instances commit.

Four channels: ``cebroker_subscriptions`` (a subscription change committed; the payload is its
version), ``cebroker_due`` (deliveries wait unclaimed; the payload names their subscriptions,
or is ``*``), ``cebroker_registry`` (a registry write committed; the payload is its
version) and ``cebroker_replies`` (a reply committed; the payload is the event, see
:mod:`.replies`). A notification is only a hint to look: the tables are the truth, so a
notification missed while the connection was down costs nothing but a delay. When the
connection is lost the listener reconnects by itself and then calls every ``on_connect``
handler, which reads what may have been missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from cebroker.storage.postgres.background import Background

log = logging.getLogger("cebroker.storage")

SUBSCRIPTIONS = "cebroker_subscriptions"
DUE = "cebroker_due"
REGISTRY = "cebroker_registry"
REPLIES = "cebroker_replies"
#: Seconds between reconnection attempts (doubling up to the maximum).
RETRY_FIRST, RETRY_MAX = 0.2, 2.0

Handler = Callable[[str], None]


class Listener:
    """Dispatches notifications of each channel to its handlers, on the event loop."""

    def __init__(self, url: str, kwargs: dict[str, Any]) -> None:
        self._url = url
        self._kwargs = kwargs
        self._handlers: dict[str, list[Handler]] = {SUBSCRIPTIONS: [], DUE: [], REGISTRY: [], REPLIES: []}
        self._on_connect: list[Callable[[], None]] = []
        self._loop = Background("cebroker-postgres-listener", self._run)
        self.connected = asyncio.Event()

    def on(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with the payload of every notification on ``channel``."""
        self._handlers[channel].append(handler)

    def on_connect(self, handler: Callable[[], None]) -> None:
        """Call ``handler`` each time the listener has (re)connected and listens."""
        self._on_connect.append(handler)

    def start(self) -> None:
        """Connect and listen in the background."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        await self._loop.stop()

    async def _run(self) -> None:
        delay = RETRY_FIRST
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, **self._kwargs)
            except psycopg.Error as exc:
                log.debug("listener cannot connect: %s", exc)
                await asyncio.sleep(delay)
                delay = min(RETRY_MAX, delay * 2)
                continue
            delay = RETRY_FIRST
            try:
                async with conn:
                    for channel in self._handlers:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.connected.set()
                    for handler in self._on_connect:
                        self._call(handler)
                    async for note in conn.notifies():
                        for listener in self._handlers.get(note.channel, ()):
                            self._call(listener, note.payload)
            except psycopg.Error as exc:
                log.debug("listener connection lost: %s", exc)
            except Exception:
                # A fault of this process, not of the server: listen again all the same, or this
                # instance would hear of no change or due delivery until it restarts.
                log.exception("listener failed; listening again")
            finally:
                self.connected.clear()
            await asyncio.sleep(delay)

    @staticmethod
    def _call(handler: Callable[..., None], *args: str) -> None:
        try:
            handler(*args)
        except Exception:  # a broken handler must not stop the others, nor the listener
            log.exception("a notification handler failed")
