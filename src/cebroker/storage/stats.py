"""Delivery counts per subscription (the :class:`DeliveryStats` contract)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class SubscriptionCounts:
    """What the log counts for one subscription (all zero for one it holds nothing of)."""

    #: Deliveries confirmed by the sink, ever.
    delivered: int = 0
    #: Attempts that failed, ever (retried or not).
    failed: int = 0
    #: Deliveries in the log now.
    pending: int = 0
    #: Dead letters kept now.
    deadlettered: int = 0
    #: Deliveries moved to the dead letters, ever (redriven ones included).
    deadlettered_total: int = 0
    #: The error of the last failed attempt, None if none failed.
    last_error: str | None = None
    #: When it failed (epoch seconds), None if none failed.
    last_error_at: float | None = None


#: A ``pipeline_stats`` row without its subscription: delivered, failed, dead-lettered ever,
#: the last error and when it happened.
StatsRow = tuple[Any, Any, Any, Any, Any]
#: What a subscription without a stats row has counted.
NO_STATS: StatsRow = (0, 0, 0, None, None)


def counts(pending: int, dead: int, stats: StatsRow) -> SubscriptionCounts:
    """One subscription's counts from its deliveries pending, its dead letters kept and its
    stats row (the same in every backend)."""
    last_at = stats[4]
    return SubscriptionCounts(
        delivered=int(stats[0]),
        failed=int(stats[1]),
        pending=int(pending),
        deadlettered=int(dead),
        deadlettered_total=int(stats[2]),
        last_error=stats[3],
        last_error_at=None if last_at is None else float(last_at),
    )


def every_count(
    pending: Mapping[str, int], dead: Mapping[str, int], stats: Mapping[str, StatsRow]
) -> dict[str, SubscriptionCounts]:
    """The counts of every subscription named in any of the three reads."""
    names = dict.fromkeys([*pending, *dead, *stats])
    return {
        name: counts(pending.get(name, 0), dead.get(name, 0), stats.get(name, NO_STATS)) for name in names
    }


@runtime_checkable
class DeliveryStats(Protocol):
    """What the log counts: deliveries pending, confirmed, failed and dead-lettered, and the
    last error, per subscription and over the whole log.

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`.
    """

    async def pending(self) -> int:
        """Deliveries in the log, every instance's together (the shared backlog)."""
        ...

    async def status(self, subscription: str) -> SubscriptionCounts:
        """Counts and the last error of one subscription."""
        ...

    async def statuses(self) -> dict[str, SubscriptionCounts]:
        """:meth:`status` of every subscription the log holds anything for, in one read (the
        broker-wide overview and the console's subscription list)."""
        ...
