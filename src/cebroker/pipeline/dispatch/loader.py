"""Loads due deliveries from the durable log into their lanes.

Fresh deliveries go straight from a committed ingest into their lane; the log is read, a page
at a time and per subscription, only for what memory does not hold: retries that fall due,
deliveries that did not fit in their lane, and everything pending after a restart. The loader
keeps, per subscription with such deliveries, when the next one falls due, and sleeps on the
clock until then (or until woken).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from cebroker.clock import Clock, wait_or_sleep
from cebroker.pipeline.dispatch.due import DueTimes
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.lanes import Lanes
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.storage.claims import Claims
from cebroker.storage.deliveries import DueQueue, Limits
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.pipeline")

#: Longest sleep with nothing due: a read that failed is tried again after at most this long.
RECHECK = 1.0


class Loader:
    """The loop that loads what falls due, as ``due`` (:class:`~.due.DueTimes`) says.

    ``deleted`` is called for a subscription found deleted while rows of it wait in the log
    (an ingest that matched it committed just after the deletion's clean-up). ``closed`` says
    whether a subscription's circuit lets its deliveries be attempted: while it does not, its
    deliveries stay in the log (the circuit's probes read their own, and closing the circuit
    schedules the subscription again). ``claims`` (a shared log's): the loader claims what it
    loads, within limits held for every instance, and takes only this instance's share.
    """

    def __init__(
        self,
        journal: DueQueue,
        lanes: Lanes,
        *,
        subscriptions: Mapping[str, Subscription],
        setups: DeliverySetups,
        metrics: PipelineMetrics,
        clock: Clock,
        due: DueTimes,
        deleted: Callable[[str], None],
        closed: Callable[[str], bool],
        claims: Claims | None = None,
    ) -> None:
        self._setups = setups
        self._log = journal
        self._claims = claims
        self._lanes = lanes
        self._subscriptions = subscriptions
        self._metrics = metrics
        self._clock = clock
        self._deleted = deleted
        self._closed = closed
        self._due = due
        self._rescan = asyncio.Event()

    def heard(self, subscription: str | None) -> None:
        """A shared log says deliveries of ``subscription`` (None: of any) wait unclaimed."""
        if subscription is None:
            self._rescan.set()
        elif subscription in self._subscriptions:
            self._due.schedule(subscription, 0.0)

    async def rescan(self, every: float) -> None:
        """With a shared log: every ``every`` seconds, or when told to, look for subscriptions
        with deliveries in the log (retries another instance scheduled before it died, claims
        freed while a notification was missed); forever. Without claims there is nothing to
        look for: every delivery of the log was written by this instance."""
        claims = self._claims
        if claims is None:
            return
        while True:
            await wait_or_sleep(self._rescan, every, self._clock)
            self._rescan.clear()
            try:
                waiting = await claims.waiting()
            except Exception:
                log_failure("looking for pending deliveries failed")
                continue
            for subscription, due_at in waiting.items():
                if subscription in self._subscriptions:
                    self._due.schedule(subscription, due_at)

    async def run(self) -> None:
        """Load what falls due, then sleep until the next due time or a wake-up; forever."""
        while True:
            now = self._clock.now()
            wake_at = now + RECHECK
            ready: list[tuple[str, float]] = []
            for subscription, due_at in self._due.items():
                if due_at > now:
                    wake_at = min(wake_at, due_at)
                else:
                    ready.append((subscription, due_at))
            if self._claims is not None:  # claims of every subscription at once: sent together
                await asyncio.gather(*(self._load(subscription, due_at) for subscription, due_at in ready))
            else:
                for subscription, due_at in ready:
                    await self._load(subscription, due_at)
            self._metrics.queued.set(self._lanes.queued)
            self._due.wakeup.clear()
            await wait_or_sleep(self._due.wakeup, max(0.0, wake_at - self._clock.now()), self._clock)

    def _saturated(self, lane: Lane, policy: DeliveryPolicy, room: int) -> bool:
        """Whether to leave a lane as it is for now although it has ``room``: deliveries are not
        claimed, the lane is more than half full and its queue holds work for every worker.

        Each load is a read of the log on its writer (without claims, the deliveries already in
        memory, which stay due until their outcome is written, are left out by the log), so
        loading each time a few slots free up would make a read for every few deliveries. The
        lane's releases wake the loader again, until its queue runs shorter than its
        concurrency or half of it is free."""
        if self._claims is not None or lane.batch is not None or room * 2 >= lane.capacity:
            return False
        return len(lane.queue) >= policy.concurrency

    async def _load(self, subscription: str, due_at: float) -> None:
        current = self._subscriptions.get(subscription)
        if current is None:
            self._due.forget(subscription)
            self._deleted(subscription)
            return
        if not self._closed(subscription):
            return  # its sink's circuit is open
        lane = self._lanes.get(current)
        policy = self._setups.of(current).policy
        room = lane.room(policy)
        if room <= 0:
            return  # the lane wakes the loader when it makes room
        if self._saturated(lane, policy, room):
            return  # likewise
        lane.loading += 1
        try:
            if self._claims is not None:  # claims: only what this lane takes, within the global limits
                limits = Limits(policy.concurrency, policy.ratelimit)
                rows, later = await self._log.due(subscription, room, limits)
            else:  # the log leaves out the rows in memory (any that come back are skipped below)
                rows, later = await self._log.due(subscription, room, held=lane.inflight)
        except Exception:
            log_failure("reading due deliveries failed")
            rows, later = None, None
        finally:
            lane.loading -= 1
        # Without claims, a delivery settled while the read was under way may be in it as still
        # due (the read began before its outcome was written): queued again, it would be
        # attempted twice. It is skipped, and the log read again (a retry or a reload of it is
        # due later, or now). Claims cannot return it: they are taken in the write that returns
        # them, and a claimed row is not returned to anyone.
        settled = lane.settled_while_loading if self._claims is None else set()
        skipped = False
        for row in rows or ():
            if row.id in settled:
                skipped = True
            elif row.id not in lane.inflight and lane.free > 0:
                lane.push(Item.from_row(row))
        if not lane.loading:
            lane.settled_while_loading.clear()
        if rows is None:
            return
        self._due.loaded(subscription, due_at, later)
        if skipped:
            self._due.schedule(subscription, 0.0)
        self._lanes.start_workers(lane)
        if not self._due.waiting(subscription):
            self._lanes.drop_if_idle(lane)  # nothing of it in the log, nothing in memory
