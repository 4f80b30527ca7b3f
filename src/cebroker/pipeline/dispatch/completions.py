"""Records finished deliveries in the durable log, many per write.

Confirmed deliveries are removed from the log and counted as delivered; deliveries of a
subscription deleted meanwhile are removed without a count. A delivery stays in flight in its
lane until its removal has committed, so that the loader never hands it out again; a write that
fails is tried again a moment later with everything that came in meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.backlog import Backlog
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.storage.outcomes import Outcomes

log = logging.getLogger("cebroker.pipeline")

#: Seconds before a failed completion write is tried again.
RETRY_PAUSE = 1.0

#: Frees a delivery's slot in its lane once its outcome is recorded.
Release = Callable[[Lane, int], None]


class Completions:
    """Collects delivered and dropped deliveries; :meth:`run` writes them as they come."""

    def __init__(self, journal: Outcomes, backlog: Backlog, release: Release, clock: Clock) -> None:
        self._log = journal
        self._backlog = backlog
        self._release = release
        self._clock = clock
        self._delivered: list[tuple[Lane, Item]] = []
        self._dropped: list[tuple[Lane, Item]] = []
        self._pending = asyncio.Event()

    def delivered(self, lane: Lane, item: Item) -> None:
        """The sink confirmed ``item``."""
        self._delivered.append((lane, item))
        self._pending.set()

    def dropped(self, lane: Lane, item: Item) -> None:
        """``item`` belongs to a deleted subscription: remove it, undelivered."""
        self._dropped.append((lane, item))
        self._pending.set()

    async def run(self) -> None:
        """Write what has come in, whenever something has; forever."""
        while True:
            await self._pending.wait()
            self._pending.clear()
            try:
                await self.flush()
            except Exception:
                log_failure("recording completed deliveries failed; will retry")
                await self._clock.sleep(RETRY_PAUSE)
                self._pending.set()

    async def flush(self) -> None:
        """Write everything collected so far; on failure it is kept for the next try."""
        done, self._delivered = self._delivered, []
        dropped, self._dropped = self._dropped, []
        try:
            if done:
                await self._log.complete([(i.row.id, i.row.event_seq, lane.id) for lane, i in done])
            removed = (
                await self._log.drop([(i.row.id, i.row.event_seq) for _, i in dropped]) if dropped else 0
            )
        except BaseException:
            self._delivered[:0], self._dropped[:0] = done, dropped
            raise
        for lane, item in [*done, *dropped]:
            self._release(lane, item.row.id)
        self._backlog.settled(len(done) + removed)
