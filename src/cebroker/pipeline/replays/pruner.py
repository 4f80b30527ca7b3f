"""Keeps the archive within ``--retention`` and ``--retention-bytes``, and its size on /metrics.

Pruning runs in the background in small steps (:data:`STEP` events each, a short transaction),
one after the other while there is work and once a second otherwise, so ingest never waits for
more than one step. Every pass also reads the archive's size and oldest event into the gauges.
"""

from __future__ import annotations

import asyncio

from prometheus_client import Counter, Gauge

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.storage.archive import EventArchive

#: Events one pruning step takes out at most.
STEP = 500
#: Seconds between passes when there is nothing to prune.
EVERY = 1.0


class Pruner:
    """The archive's upkeep. ``max_bytes``: the size bound (None: only the age)."""

    def __init__(
        self,
        archive: EventArchive,
        *,
        max_bytes: int | None,
        clock: Clock,
        events: Gauge,
        size: Gauge,
        oldest: Gauge,
        pruned: Counter,
    ) -> None:
        self._archive = archive
        self._max_bytes = max_bytes
        self._clock = clock
        self._events = events
        self._size = size
        self._oldest = oldest
        self._pruned = pruned

    async def run(self) -> None:
        """Prune and measure, forever."""
        while True:
            await self.pass_once()
            await self._clock.sleep(EVERY)

    async def pass_once(self) -> None:
        """Prune until nothing more is due now, then update the gauges."""
        retention = self._archive.retention
        try:
            while retention > 0:
                removed = await self._archive.prune(self._clock.now() - retention, self._max_bytes, STEP)
                self._pruned.inc(removed)
                if removed < STEP:
                    break
                await asyncio.sleep(0)  # ingest's commits go first between two steps
            stats = await self._archive.stats()
        except Exception:
            log_failure("pruning the archive failed")
            return
        self._events.set(stats.events)
        self._size.set(stats.bytes)
        self._oldest.set(stats.oldest or 0.0)
