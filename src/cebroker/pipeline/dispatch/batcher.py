"""Filling a batch from a lane's queue: the deliveries a batching lane sends in one request.

A worker takes the first queued delivery, then the next ones as long as the batch stays within
its :class:`~.setup.BatchLimits` (events and bytes; one delivery always goes, however large),
waiting for more to be queued until ``delay`` has passed since it took the first. A full batch
goes at once; a trickle goes after ``delay`` at most.
"""

from __future__ import annotations

from cebroker.clock import Clock, wait_or_sleep
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.setup import BatchLimits


def wanted_workers(lane: Lane, limits: BatchLimits) -> int:
    """Workers worth running for what is queued: one per batch it fills, one at least."""
    return max(1, -(-len(lane.queue) // limits.events))


async def collect(lane: Lane, limits: BatchLimits, clock: Clock) -> list[Item]:
    """Take the next batch from ``lane``'s queue (which holds one delivery at least)."""
    first = lane.queue.popleft()
    batch = [first]
    size = 2 + first.size()  # the array's brackets, and a comma before every event but the first
    deadline = clock.monotonic() + limits.delay
    while len(batch) < limits.events:
        if lane.queue:
            following = 1 + lane.queue[0].size()
            if size + following > limits.size:
                break
            batch.append(lane.queue.popleft())
            size += following
            continue
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            break
        lane.arrived.clear()
        await wait_or_sleep(lane.arrived, remaining, clock)
    return batch
