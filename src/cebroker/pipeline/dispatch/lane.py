"""A subscription's lane: its in-memory queue, in-flight set, concurrency and rate limit.

Each subscription gets its own lane, so a slow or failing sink only ever holds up its own
deliveries. A lane holds at most ``capacity`` deliveries in memory; the rest wait in the
durable log until the lane has room. An HTTP subscription with ``contentmode: batch`` has
:class:`~.setup.BatchLimits`: its workers send several queued deliveries in one request
(:mod:`.batcher`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson

from cebroker.clock import Clock
from cebroker.pipeline.dispatch.setup import BatchLimits, DeliverySetup
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.storage.claims import Claims
from cebroker.storage.deliveries import Pending

log = logging.getLogger("cebroker.pipeline")

#: The extension attribute that marks a replayed delivery with the id of its replay (it
#: replaces an attribute of that name the event carried when it was accepted).
REPLAY_ATTRIBUTE = "replayid"


@dataclass(slots=True)
class Item:
    """A delivery held in memory: its log row and the parsed event (as it is sent)."""

    row: Pending
    event: dict[str, Any]

    @classmethod
    def from_row(cls, row: Pending) -> Item:
        """Parse the stored event of ``row`` (read from the log, so it has one); a replayed
        delivery is marked with its replay."""
        if row.body is None:
            raise ValueError(f"delivery {row.id} carries no event")
        event = orjson.loads(row.body)
        if row.replay is not None:
            event[REPLAY_ATTRIBUTE] = row.replay
        return cls(row, event)

    def size(self) -> int:
        """The bytes of the event's JSON (the stored text when there is one: close enough)."""
        body = self.row.body
        if body is None:
            return len(orjson.dumps(self.event))
        return len(body) + (len(self.row.replay) + 16 if self.row.replay is not None else 0)


#: Full batches a batching lane may hold in memory at once (its capacity grows to hold them).
BATCHES_HELD = 4


class TokenBucket:
    """At most ``rate`` acquisitions per second of ``clock``, with a burst of one second's worth."""

    def __init__(self, rate: float, clock: Clock) -> None:
        self.rate = rate
        self._clock = clock
        self._capacity = max(1.0, rate)
        self._tokens = self._capacity
        self._stamp = clock.monotonic()

    async def acquire(self) -> None:
        """Wait for a token (tokens are taken in arrival order on one event loop)."""
        while True:
            now = self._clock.monotonic()
            self._tokens = min(self._capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
            await self._clock.sleep((1.0 - self._tokens) / self.rate)


class Lane:
    """One subscription's deliveries in memory; :class:`~.lanes.Lanes` runs its workers."""

    def __init__(
        self, subscription_id: str, capacity: int, clock: Clock, *, claims: Claims | None = None
    ) -> None:
        self.id = subscription_id
        self._base_capacity = capacity
        self.capacity = capacity
        self._clock = clock
        #: A shared log's claims: the log enforces concurrency and rate over every instance, and
        #: the lane asks for its share (None: the lane enforces the limits itself).
        self.claims = claims
        self.queue: deque[Item] = deque()
        #: Delivery ids queued, being delivered or awaiting their log update.
        self.inflight: set[int] = set()
        #: How many of them are done and wait only for their removal from the log to be written
        #: (:mod:`.completions` gathers those for a moment): see :attr:`free`.
        self.settling = 0
        #: Those of them that a replay queued.
        self.replayed: set[int] = set()
        #: Reads of due deliveries under way for this lane, and the ids whose outcome was
        #: written meanwhile: such a read may have been taken before that write and still return
        #: them as due, and they must not be queued again.
        self.loading = 0
        self.settled_while_loading: set[int] = set()
        #: Set when a delivery is queued (a batching worker waits on it for more).
        self.arrived = asyncio.Event()
        self.workers = 0
        #: The setup of the subscription's revision the lane follows (see :meth:`follow`).
        self.setup: DeliverySetup | None = None
        self.limiter: TokenBucket | None = None
        #: Set for a subscription whose deliveries go out in batches.
        self.batch: BatchLimits | None = None

    @property
    def free(self) -> int:
        """How many more deliveries this lane may take into memory: ``capacity`` counts those
        queued or being delivered, and those done but not yet written (:attr:`settling`) up to
        another ``capacity``. Counted in full, a drain's done deliveries filled the lane while
        their completion write gathered, and its workers ran out of deliveries to send until the
        write and the next read of the log (docs/performance.md, "Protocol deliveries, the
        fourth round"). They stay in :attr:`inflight` until written, so the log leaves them out
        and no read hands them out again."""
        return self.capacity - len(self.inflight) + min(self.settling, self.capacity)

    def room(self, policy: DeliveryPolicy) -> int:
        """How many more deliveries to ask the log for: the free places, and with limits
        enforced by a shared log (``claims``) no more than this instance's share of the
        concurrency leaves (the ``policy``'s concurrency over the instances using the log,
        rounded up; the claims of this lane count against it until their outcome is written).
        Shares keep one instance from holding every slot of a subscription while the others can
        only wait for one."""
        if self.claims is None:
            return self.free
        share = -(-policy.concurrency // max(1, self.claims.instances))
        return min(self.free, share - len(self.inflight))

    def push(self, item: Item) -> None:
        """Queue a delivery."""
        self.inflight.add(item.row.id)
        if item.row.replay is not None:
            self.replayed.add(item.row.id)
        self.queue.append(item)
        self.arrived.set()

    def follow(self, setup: DeliverySetup) -> None:
        """Take up the setup of the subscription's current revision: its batching, the capacity
        that follows from it, and its rate limit (a bucket of the same rate is kept)."""
        if setup is self.setup:
            return
        self.setup = setup
        self.batch = setup.batch
        # A batching lane holds a few full batches, so that the next ones fill while some are
        # out (within its concurrency: never more than BATCHES_HELD of them).
        self.capacity = self._base_capacity
        if self.batch is not None:
            held = min(setup.policy.concurrency, BATCHES_HELD) * self.batch.events
            self.capacity = max(self._base_capacity, held)
        rate = setup.policy.ratelimit if self.claims is None else None
        if rate is None:
            self.limiter = None
        elif self.limiter is None or self.limiter.rate != rate:
            self.limiter = TokenBucket(rate, self._clock)

    @property
    def idle(self) -> bool:
        """Nothing queued, in flight or running."""
        return not self.inflight and not self.queue and self.workers == 0
