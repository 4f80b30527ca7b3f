"""The due queue: reading back the deliveries that fall due (the :class:`DueQueue` contract).

**Ordering groups.** A delivery may belong to an ordering group (``Incoming.groups``): the
deliveries of one subscription with the same group are handed out one at a time, lowest id
first. The log holds the later ones back (their due time is :data:`HELD_AT`, so neither ``due``
nor a claim returns them) until the one before has left the log, confirmed or dead-lettered;
its removal releases the next, due at once. The order therefore holds across retries, restarts
and, on a shared log, across instances.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: The due time of a delivery held back behind an earlier one of its ordering group: later than
#: any real time, so it is never due and never claimed until the log releases it.
HELD_AT = 1e18


@dataclass(frozen=True, slots=True)
class Pending:
    """A delivery entry read back from the log."""

    id: int
    event_seq: int
    subscription: str
    attempts: int
    first_at: float
    #: The event's JSON as stored (None for a delivery handed over straight from its ingest).
    body: bytes | str | None
    #: The claim this delivery was handed out under ("" when the log hands out no claims): see
    #: :meth:`cebroker.storage.claims.Claims.holds`.
    owner: str = ""
    #: The replay that queued this delivery (:mod:`cebroker.storage.archive`), None if live.
    replay: str | None = None
    #: The event's trace context as appended (``Incoming.trace``), None if not traced.
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """A subscription's delivery limits, which a shared log enforces over every instance:
    at most ``concurrency`` of its deliveries claimed at once, and at most ``rate`` claims per
    second (None: no rate limit), with a burst of one second's worth."""

    concurrency: int
    rate: float | None = None


@runtime_checkable
class DueQueue(Protocol):
    """The deliveries waiting in the log, as the dispatcher reads them.

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`.
    """

    async def due(
        self, subscription: str, limit: int, limits: Limits | None = None, *, held: Collection[int] = ()
    ) -> tuple[list[Pending], float | None]:
        """Up to ``limit`` deliveries of ``subscription`` due now (earliest due first, then
        oldest) and when the next one not returned falls due (now if more are due, None if
        there are none).

        A log that also provides :class:`~cebroker.storage.claims.Claims` claims what it returns
        for this instance, within ``limits`` over all instances, and returns nothing already
        claimed; when the limits hold deliveries back the next time is when a claim may
        succeed. A log of one process leaves ``limits`` to the dispatcher and leaves out the
        deliveries ``held`` (their ids, as of the call: those the dispatcher holds in memory,
        which stay due in the log until their outcome is written); the dispatcher skips any
        it holds that come back all the same."""
        ...

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""
        ...
