"""Drives the running replays: each step queues the next deliveries of a replay, up to its window.

A replay holds at most ``window`` deliveries in the log at a time (queued, in flight or waiting
for a retry): the subscription's ``concurrency``. Its deliveries are due when queued, so the
live deliveries accepted before a step go out first and those accepted after wait behind one
window at most: a replay takes its own share of the lane and never more. When its deliveries
settle the dispatcher wakes the replayer, which queues the next ones (on a shared log any
instance may step a replay, one at a time). Every running replay is looked at again every
:data:`POLL` seconds, which finds the replays other instances created and those whose
deliveries settled elsewhere.

A replay that drops out of the running ones (scanned to its end, or cancelled elsewhere) is
watched at every look until it is finished (``done``: every delivery settled, or
``cancelled``); then ``finished`` is told once. Every instance that stepped it tells it (the
broker event's id derives from the replay's, so de-duplication keeps one); a replay whose last
deliveries settle while no instance that stepped it is running is not told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from cefilters import BudgetObserver

from cebroker.clock import Clock, wait_or_sleep
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.replays.matching import ReplayFilter
from cebroker.storage.archive import EventArchive, Replay
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing

#: Seconds between looks at every running replay.
POLL = 1.0
#: Archived events one step reads at most: a step runs on the storage's writer on SQLite, so
#: it is kept short, as ingest's commits wait for it.
SCAN = 256


def window(subscription: Subscription) -> int:
    """How many of a replay's deliveries may be in the log at once: the concurrency."""
    return max(1, subscription.delivery.concurrency)


class Replayer:
    """Steps every running replay; ``replayed(subscription, count)`` hands each step's new
    deliveries to the dispatcher."""

    def __init__(
        self,
        archive: EventArchive,
        subscriptions: Mapping[str, Subscription],
        replayed: Callable[[str, int], None],
        *,
        clock: Clock,
        receive: Callable[[Subscription], Mapping[str, Any] | None] = lambda subscription: None,
        observer: BudgetObserver | None = None,
        tracing: Tracing = NO_TRACING,
        finished: Callable[[Replay, Subscription], None] = lambda replay, subscription: None,
    ) -> None:
        self._tracing = tracing
        self._finished = finished
        self._finishing: dict[str, Replay] = {}
        self._archive = archive
        self._observer = observer
        self._receive = receive
        self._subscriptions = subscriptions
        self._replayed = replayed
        self._clock = clock
        self._running: dict[str, Replay] = {}
        self._filters: dict[str, ReplayFilter] = {}
        self._wake = asyncio.Event()

    def started(self, replay: Replay) -> None:
        """A replay was created: start queueing it now."""
        self._running[replay.id] = replay
        self._wake.set()

    def wake(self) -> None:
        """Deliveries of a replay settled: there may be room for more."""
        self._wake.set()

    def stopped(self, replay: str) -> None:
        """A replay was cancelled (or its subscription deleted)."""
        self._running.pop(replay, None)
        self._filters.pop(replay, None)
        self._finishing.pop(replay, None)

    def ended(self, replay: Replay) -> None:
        """``replay`` is finished (``done`` or ``cancelled``): tell ``finished`` (nothing if its
        subscription is gone)."""
        subscription = self._subscriptions.get(replay.subscription)
        if subscription is not None:
            self._finished(replay, subscription)

    async def run(self) -> None:
        """Step the running replays whenever woken, and every :data:`POLL` seconds; forever."""
        refresh_at = 0.0
        while True:
            self._wake.clear()
            if self._clock.monotonic() >= refresh_at:
                refresh_at = self._clock.monotonic() + POLL
                try:
                    found = await self._archive.replays(None)
                except Exception:
                    log_failure("looking for running replays failed")
                else:
                    running = {replay.id: replay for replay in found}
                    for left in set(self._running) - set(running):
                        self._finishing[left] = self._running[left]
                    self._running = running
                    for gone in set(self._filters) - set(self._running):
                        del self._filters[gone]
                    await self._watch_finishing()
            for replay in list(self._running.values()):
                try:
                    await self._step(replay)
                except Exception:
                    log_failure("replay %s: queueing deliveries failed", replay.id)
            await wait_or_sleep(self._wake, POLL, self._clock)

    async def _watch_finishing(self) -> None:
        """Tell the replays that left the running ones and are now finished."""
        for replay in list(self._finishing.values()):
            try:
                now = [r for r in await self._archive.replays(replay.subscription) if r.id == replay.id]
            except Exception:
                log_failure("replay %s: reading its state failed", replay.id)
                continue
            if not now:  # its subscription was deleted, and it with it
                del self._finishing[replay.id]
            elif now[0].state != "running":
                del self._finishing[replay.id]
                self.ended(now[0])

    async def _step(self, replay: Replay) -> None:
        subscription = self._subscriptions.get(replay.subscription)
        if subscription is None:  # deleted: the clean-up removes the replay
            self.stopped(replay.id)
            return
        chosen = self._filter(replay, subscription)
        size = window(subscription)
        while True:
            step = await self._archive.queue(replay.id, size, SCAN, chosen.pick)
            if step.queued:
                self._replayed(subscription.id, step.queued)
                if self._tracing.enabled:  # each delivery's attempts join its event's own trace
                    self._tracing.replay(replay=replay.id, subscription=subscription.id, queued=step.queued)
            if not step.more:
                return
            await asyncio.sleep(0)  # let ingest and the deliveries run between steps

    def _filter(self, replay: Replay, subscription: Subscription) -> ReplayFilter:
        """The replay's filter over the subscription's current revision."""
        chosen = self._filters.get(replay.id)
        if chosen is None or chosen.subscription is not subscription:
            extra: Any = orjson.loads(replay.filter) if replay.filter is not None else None
            chosen = self._filters[replay.id] = ReplayFilter(
                subscription, replay.id, extra, receive=self._receive(subscription), observer=self._observer
            )
        return chosen
