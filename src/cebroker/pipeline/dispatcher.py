"""Delivers pending deliveries through each subscription's lane, with retries and dead letters.

Fresh deliveries go straight from a committed ingest into their lane (no read back). The log
is read, a page at a time and per subscription, only for what memory does not hold: retries
that fall due, deliveries that did not fit in their lane, and everything pending after a
restart. A delivery stays "in flight" until its log update has committed, so the loader never
hands out a delivery twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import sys
import time
from collections.abc import Coroutine, Sequence
from typing import Any

import orjson
from ceprotocols.errors import DeliveryError
from ceprotocols.sender import Destination

from cebroker.pipeline.lane import Item, Lane
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.senders import SenderPool
from cebroker.storage.deliveries import Appended, DeliveryLog, Pending
from cebroker.storage.errors import StorageUnavailable

log = logging.getLogger("cebroker.pipeline")

#: Seconds before a delivery whose outcome could not be recorded is loaded from the log again.
RELOAD_DELAY = 5.0


def _log_failure(message: str, *args: object) -> None:
    """Log the exception being handled: a storage outage (which the storage's health logs once
    per episode) at debug level without a traceback, anything else with its traceback."""
    exc = sys.exc_info()[1]
    if isinstance(exc, StorageUnavailable):
        log.debug(message + ": %s", *args, exc)
    else:
        log.exception(message, *args)


class Dispatcher:
    """Owns the lanes, their workers, the log loader and the completion writer."""

    def __init__(
        self,
        journal: DeliveryLog,
        matcher: Matcher,
        senders: SenderPool,
        metrics: PipelineMetrics,
        *,
        lane_capacity: int = 256,
    ) -> None:
        self._log = journal
        self._matcher = matcher
        self._senders = senders
        self._metrics = metrics
        self._lane_capacity = lane_capacity
        self._lanes: dict[str, Lane] = {}
        #: Subscriptions with deliveries in the log that are not in memory -> when they fall due.
        self._due: dict[str, float] = {}
        self._wake = asyncio.Event()
        self._done: list[tuple[Lane, Item]] = []
        self._dropped: list[tuple[Lane, Item]] = []
        self._flush = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._background: list[asyncio.Task[None]] = []
        self._running = False
        #: Deliveries in the log (the durable backlog).
        self.pending = 0

    async def start(self) -> None:
        """Resume every pending delivery found in the log and start the background loops."""
        backlog = await self._log.backlog()
        for subscription, (count, due_at) in backlog.items():
            if subscription in self._matcher.subscriptions:
                self._due[subscription] = due_at
                self.pending += count
            else:  # deleted while the broker was down
                await self._log.forget(subscription)
        self._metrics.backlog.set(self.pending)
        self._running = True
        self._background = [
            asyncio.create_task(self._load_loop(), name="cebroker-loader"),
            asyncio.create_task(self._flush_loop(), name="cebroker-completions"),
        ]

    async def stop(self) -> None:
        """Stop loading and delivering; deliveries not confirmed stay pending in the log."""
        self._running = False
        for task in [*self._background, *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._background, *self._tasks, return_exceptions=True)
        await self._flush_once()

    # -- input -------------------------------------------------------------------------------

    def accept(self, events: Sequence[dict[str, Any]], written: Sequence[Appended | None]) -> None:
        """Take the deliveries of a committed ingest (``written``, per event) into their lanes."""
        for event, appended in zip(events, written, strict=True):
            if appended is None:
                continue
            for delivery_id, subscription in appended.deliveries:
                self.pending += 1
                lane = self._lane(subscription)
                if subscription in self._due or lane.free <= 0:
                    self._due[subscription] = 0.0  # it waits in the log; keep the lane's order
                    self._wake.set()
                    continue
                row = Pending(delivery_id, appended.seq, subscription, 0, appended.at, None)
                lane.push(Item(row, event))
                self._spawn(lane)
        self._metrics.backlog.set(self.pending)

    def redriven(self, subscription: str, count: int) -> None:
        """``count`` dead letters of ``subscription`` were put back in the log as deliveries."""
        self.pending += count
        self._metrics.backlog.set(self.pending)
        self._due[subscription] = 0.0
        self._wake.set()

    async def forget(self, subscription: str) -> None:
        """A subscription was deleted: drop its lane and everything the log keeps for it."""
        self._due.pop(subscription, None)
        self._lanes.pop(subscription, None)
        try:
            removed = await self._log.forget(subscription)
        except StorageUnavailable as exc:
            # Its rows stay; the loader finds them again and retries (see _load_loop).
            log.debug("forgetting subscription %s failed: %s", subscription, exc)
            self._due[subscription] = time.time() + RELOAD_DELAY
            self._wake.set()
            return
        self.pending = max(0, self.pending - removed)
        self._metrics.backlog.set(self.pending)

    # -- lanes and workers -------------------------------------------------------------------

    def _lane(self, subscription: str) -> Lane:
        lane = self._lanes.get(subscription)
        if lane is None:
            lane = self._lanes[subscription] = Lane(subscription, self._lane_capacity)
        return lane

    def _spawn(self, lane: Lane) -> None:
        subscription = self._matcher.subscriptions.get(lane.id)
        limit = lane.configure(subscription)[0].concurrency if subscription is not None else 1
        while lane.workers < min(limit, len(lane.queue)):
            lane.workers += 1
            task = asyncio.create_task(self._work(lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _work(self, lane: Lane) -> None:
        try:
            while lane.queue and self._running:
                item = lane.queue.popleft()
                try:
                    await self._attempt(lane, item)
                except Exception:
                    # Recording the outcome failed (the log is unwritable?). The row is still in
                    # the log: let it go and have the loader pick it up again a little later.
                    _log_failure("delivery %s: recording its outcome failed", item.row.id)
                    self._release(lane, item.row.id)
                    self._due[lane.id] = min(self._due.get(lane.id, math.inf), time.time() + RELOAD_DELAY)
        finally:
            lane.workers -= 1

    async def _attempt(self, lane: Lane, item: Item) -> None:
        subscription = self._matcher.subscriptions.get(lane.id)
        if subscription is None:
            self._dropped.append((lane, item))
            self._flush.set()
            return
        policy, destination = lane.configure(subscription)
        if lane.limiter is not None:
            await lane.limiter.acquire()
        label = self._metrics.label(lane.id)
        try:
            await self._senders.get(subscription.protocol).deliver(item.event, destination)
        except DeliveryError as exc:
            await self._failed(lane, item, policy, exc, label)
        except Exception as exc:  # a sender bug must not kill the lane; treat it as transient
            log.exception("sender for %s raised an unexpected error", subscription.protocol)
            await self._failed(lane, item, policy, DeliveryError(f"sender error: {exc!r}"), label)
        else:
            self._metrics.deliveries.labels(label, "delivered").inc()
            self._metrics.latency.labels(label).observe(max(0.0, time.time() - item.row.first_at))
            self._done.append((lane, item))
            self._flush.set()

    async def _failed(
        self, lane: Lane, item: Item, policy: DeliveryPolicy, exc: DeliveryError, label: str
    ) -> None:
        if lane.id not in self._matcher.subscriptions:  # deleted during the attempt: nothing to keep
            self._dropped.append((lane, item))
            self._flush.set()
            return
        attempts = item.row.attempts + 1
        error = str(exc)
        if exc.retryable:
            next_at = time.time() + policy.delay(attempts, exc.retry_after)
            if not policy.gives_up(attempts, next_at, item.row.first_at):
                self._metrics.deliveries.labels(label, "retry").inc()
                self._metrics.retries.labels(label).inc()
                await self._log.reschedule(item.row, attempts, next_at, error)
                self._release(lane, item.row.id)
                self._due[lane.id] = min(self._due.get(lane.id, math.inf), next_at)
                self._wake.set()
                return
            error = f"gave up after {attempts} attempts: {error}"
        status = None if exc.status is None else str(exc.status)
        self._metrics.deliveries.labels(label, "deadlettered").inc()
        self._metrics.dead_letters.labels(label).inc()
        await self._log.dead_letter(item.row, orjson.dumps(item.event), attempts, error, status, exc.body)
        self._release(lane, item.row.id)
        self.pending = max(0, self.pending - 1)
        self._metrics.backlog.set(self.pending)
        if policy.deadlettersink:
            self._forward(item, policy, error, status, attempts)

    def _forward(
        self, item: Item, policy: DeliveryPolicy, error: str, status: str | None, attempts: int
    ) -> None:
        """Send a copy of a dead-lettered event to the subscription's dead-letter sink, once."""
        event = dict(item.event)
        event.update(
            deadletterreason=error[:1024], deadlettersub=item.row.subscription, deadletterattempts=attempts
        )
        if status is not None:
            event["deadletterstatus"] = status
        sink = str(policy.deadlettersink)
        destination = Destination(
            protocol="HTTP", sink=sink, settings={"contentmode": "structured"}, timeout=policy.timeout
        )

        async def send() -> None:
            try:
                await self._senders.get("HTTP").deliver(event, destination)
            except DeliveryError as exc:
                log.warning("dead-letter sink %s refused a copy: %s", sink, exc)

        self._background_task(send())

    def _background_task(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _release(self, lane: Lane, delivery_id: int) -> None:
        lane.inflight.discard(delivery_id)
        if lane.id in self._due:
            self._wake.set()
        elif lane.idle and lane.limiter is None and self._lanes.get(lane.id) is lane:
            # An idle lane is dropped to bound memory, unless it carries a rate limit: its
            # bucket must outlive short pauses or every trickle would start with a full burst.
            del self._lanes[lane.id]

    # -- background loops --------------------------------------------------------------------

    async def _load_loop(self) -> None:
        while self._running:
            now = time.time()
            wake_at = now + 1.0
            for subscription, due_at in list(self._due.items()):
                if due_at > now:
                    wake_at = min(wake_at, due_at)
                    continue
                if subscription not in self._matcher.subscriptions:
                    # Rows of a deleted subscription (an ingest that matched it committed just
                    # after the deletion's clean-up): clean up again.
                    self._due.pop(subscription, None)
                    self._background_task(self.forget(subscription))
                    continue
                lane = self._lane(subscription)
                if lane.free <= 0:
                    continue
                try:
                    rows, later = await self._log.due(subscription, lane.free + len(lane.inflight))
                except Exception:
                    _log_failure("reading due deliveries failed")
                    continue
                for row in rows:
                    if row.id not in lane.inflight and lane.free > 0:
                        lane.push(Item.from_row(row))
                if self._due.get(subscription) == due_at:
                    if later is None:
                        del self._due[subscription]
                    else:
                        self._due[subscription] = later
                self._spawn(lane)
            self._metrics.queued.set(sum(len(lane.queue) for lane in self._lanes.values()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, wake_at - time.time()))

    async def _flush_loop(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            try:
                await self._flush_once()
            except Exception:
                _log_failure("recording completed deliveries failed; will retry")
                await asyncio.sleep(1.0)
                self._flush.set()

    async def _flush_once(self) -> None:
        done, self._done = self._done, []
        dropped, self._dropped = self._dropped, []
        try:
            if done:
                await self._log.complete([(i.row.id, i.row.event_seq, lane.id) for lane, i in done])
            removed = (
                await self._log.drop([(i.row.id, i.row.event_seq) for _, i in dropped]) if dropped else 0
            )
        except BaseException:
            self._done[:0], self._dropped[:0] = done, dropped
            raise
        for lane, item in [*done, *dropped]:
            self._release(lane, item.row.id)
        self.pending = max(0, self.pending - len(done) - removed)
        self._metrics.backlog.set(self.pending)
