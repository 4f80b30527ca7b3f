"""Coalesced flushes: one PING/PONG round trip confirms every publish made before it was sent.

Concurrent deliveries on one connection each need "the server has my message" (a flush). A
PING covers everything written before it, so the deliveries that publish in one turn of the
event loop share one round: the first of them opens it and schedules its PING for the next
turn; the others join. Rounds overlap: a publish made while an earlier PING is out gets a
PING of its own at once instead of waiting for that PONG (the server answers PINGs in order),
so a delivery waits one round trip, as with a flush of its own, not up to two.

Why the PING waits for the next turn: nats-py writes a PING to the socket directly, while a
publish goes through the client's outgoing buffer, written by the client's flusher task. The
publishes of a round woke that task before the round's task was created, so it runs first and
writes them before the PING.
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client


class Flusher:
    """Flush rounds for one connection."""

    def __init__(self, client: Client) -> None:
        self._client = client
        #: The waiters of the round whose PING is not written yet (publishes now join it). Each
        #: waiter has a future of its own, so that a cancelled delivery cancels only its own wait
        #: (a shared future would need an ``asyncio.shield`` per waiter: two futures and their
        #: callbacks for every delivery).
        self._open: list[asyncio.Future[None]] | None = None
        self._rounds: set[asyncio.Task[None]] = set()  # referenced until done
        self._within = 10.0

    async def flush(self, within: float) -> None:
        """Return once a flush that started after this call has completed (nats errors as is)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._open
        if waiters is None:
            waiters = self._open = []
            task = asyncio.create_task(self._round(waiters))
            self._rounds.add(task)
            task.add_done_callback(self._rounds.discard)
        waiters.append(waiter)
        self._within = within
        await waiter

    async def _round(self, waiters: list[asyncio.Future[None]]) -> None:
        self._open = None  # publishes from now on join the next round
        try:
            await self._client.flush(timeout=max(1, int(self._within)))
        except Exception as exc:  # handed to every waiter of this round, translated there
            for waiter in waiters:
                if not waiter.done():  # (cancelled meanwhile)
                    waiter.set_exception(exc)
        else:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
