"""Delivery counts per subscription (the :class:`DeliveryStats` contract)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class DeliveryStats(Protocol):
    """What the log counts: deliveries pending, confirmed, failed and dead-lettered, and the
    last error, per subscription and over the whole log.

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`.
    """

    async def pending(self) -> int:
        """Deliveries in the log, every instance's together (the shared backlog)."""
        ...

    async def status(self, subscription: str) -> dict[str, Any]:
        """Counts and the last error of one subscription: ``delivered``, ``failed``,
        ``pending``, ``deadlettered``, ``deadletteredTotal``, ``lastError``, ``lastErrorAt``
        (epoch seconds or None)."""
        ...

    async def statuses(self) -> dict[str, dict[str, Any]]:
        """:meth:`status` of every subscription the log holds anything for, in one read (the
        broker-wide overview and the console's subscription list)."""
        ...
