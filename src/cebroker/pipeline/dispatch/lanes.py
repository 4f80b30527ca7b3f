"""Every subscription's lane and the worker tasks that drain them.

A lane is created when a subscription first has a delivery in memory and dropped once it is
idle again (to bound memory), unless it carries a rate limit: its token bucket must outlive
short pauses, or every trickle would start with a full burst. Each lane runs at most its
subscription's ``concurrency`` workers; a worker takes deliveries from the lane's queue until it
is empty and hands each to ``attempt``, or, in a batching lane, hands batches of them
(:mod:`.batcher`) to ``attempt_batch``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.batcher import collect, wanted_workers
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.pipeline.dispatch.tasks import Tasks
from cebroker.storage.claims import Claims
from cebroker.subscription import Subscription

#: Delivers one item of a lane and records its outcome; never raises.
Attempt = Callable[[Lane, Item], Awaitable[None]]
#: Delivers items of a lane in one request and records their outcomes; never raises.
BatchAttempt = Callable[[Lane, list[Item]], Awaitable[None]]


class Lanes:
    """The lanes by subscription id; ``subscriptions`` is the live view of subscriptions."""

    def __init__(
        self,
        *,
        capacity: int,
        clock: Clock,
        subscriptions: Mapping[str, Subscription],
        setups: DeliverySetups,
        attempt: Attempt,
        attempt_batch: BatchAttempt,
        claims: Claims | None = None,
    ) -> None:
        self._setups = setups
        self._capacity = capacity
        self._claims = claims
        self._clock = clock
        self._subscriptions = subscriptions
        self._attempt = attempt
        self._attempt_batch = attempt_batch
        self._lanes: dict[str, Lane] = {}
        self._workers = Tasks()
        self._running = True

    def get(self, subscription: Subscription) -> Lane:
        """The lane of ``subscription``, created on first use, following its current revision's
        setup (:meth:`.lane.Lane.follow`)."""
        lane = self._lanes.get(subscription.id)
        if lane is None:
            lane = self._lanes[subscription.id] = Lane(
                subscription.id, self._capacity, self._clock, claims=self._claims
            )
        lane.follow(self._setups.of(subscription))
        return lane

    def replaced(self, subscription: Subscription) -> None:
        """A subscription was replaced: its lane, if it has one, follows the new revision."""
        lane = self._lanes.get(subscription.id)
        if lane is not None:
            lane.follow(self._setups.of(subscription))

    def find(self, subscription: str) -> Lane | None:
        """The lane of ``subscription`` if it has one now."""
        return self._lanes.get(subscription)

    def drop(self, subscription: str) -> None:
        """Forget the lane of a deleted subscription (its running workers find it gone)."""
        self._lanes.pop(subscription, None)

    def drop_if_idle(self, lane: Lane) -> None:
        """Drop ``lane`` if nothing is queued, in flight or running and it has no rate limit."""
        if lane.idle and lane.limiter is None and self._lanes.get(lane.id) is lane:
            del self._lanes[lane.id]

    @property
    def queued(self) -> int:
        """Deliveries waiting in memory queues, over every lane."""
        return sum(len(lane.queue) for lane in self._lanes.values())

    def start_workers(self, lane: Lane) -> None:
        """Start workers for ``lane`` up to its subscription's concurrency and its queue length."""
        subscription = self._subscriptions.get(lane.id)
        setup = lane.setup
        limit = setup.policy.concurrency if subscription is not None and setup is not None else 1
        wanted = len(lane.queue) if lane.batch is None else wanted_workers(lane, lane.batch)
        while lane.workers < min(limit, wanted, len(lane.queue)):
            lane.workers += 1
            self._workers.spawn(self._work(lane))

    async def _work(self, lane: Lane) -> None:
        try:
            while lane.queue and self._running:
                if lane.batch is None:
                    await self._attempt(lane, lane.queue.popleft())
                else:
                    await self._attempt_batch(lane, await collect(lane, lane.batch, self._clock))
        finally:
            lane.workers -= 1

    def stop_soon(self) -> None:
        """Start no further delivery (those being attempted go on); :meth:`stop` follows."""
        self._running = False

    async def stop(self, grace: float = 0.0) -> None:
        """Stop every worker; what they held stays pending in the log.

        No worker starts another delivery; those being attempted get up to ``grace`` seconds to
        finish (their outcome is recorded), then the rest are cancelled.
        """
        self._running = False
        await self._workers.settle(grace)
        await self._workers.cancel()
