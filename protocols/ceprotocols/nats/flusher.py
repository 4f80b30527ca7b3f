"""Coalesced flushes: one PING/PONG round trip confirms every publish made before it started.

Concurrent deliveries on one connection each need "the server has my message" (a flush). A
flush covers everything written before it, so deliveries that publish while no flush is pending
join the next round, and a single flush answers them all.
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client


class Flusher:
    """Flush rounds for one connection."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._round: asyncio.Future[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._within = 10.0

    async def flush(self, within: float) -> None:
        """Return once a flush that started after this call has completed (nats errors as is)."""
        if self._round is None:
            self._round = asyncio.get_running_loop().create_future()
        waiting = self._round
        self._within = within
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._run())
        await asyncio.shield(waiting)

    async def _run(self) -> None:
        while self._round is not None:
            current, self._round = self._round, None  # publishes from now on join the next round
            try:
                await self._client.flush(timeout=max(1, int(self._within)))
            except Exception as exc:  # handed to every waiter of this round, translated there
                current.set_exception(exc)
            else:
                current.set_result(None)
