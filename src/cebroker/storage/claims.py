"""Claims and leases: how instances that share one delivery log divide its work (the
:class:`Claims` contract). Only a shared backend (PostgreSQL) provides it; a log of one process
(SQLite) has none, and the dispatcher then takes what ingest wrote straight into its lanes.

With claims each due delivery is *claimed* by one instance (:meth:`DueQueue.due
<cebroker.storage.queue.DueQueue.due>` claims what it returns), the claims of an instance that
stops renewing its lease return to the others, a subscription's concurrency and rate limit are
enforced by the log for all instances together (:class:`~cebroker.storage.queue.Limits`), and
instances hear of deliveries that fell due elsewhere through ``watch``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from cebroker.storage.buckets import RateBuckets
from cebroker.storage.queue import Pending

#: Told about deliveries waiting in a shared log: a subscription id, or None for "look at all".
DueListener = Callable[[str | None], None]


@runtime_checkable
class Claims(RateBuckets, Protocol):
    """The claims this instance holds on a shared log, the leases behind them, and the
    wake-ups and token buckets every instance shares (``take``: a rate held by all of them
    together).

    Errors: the async calls may raise :class:`cebroker.storage.errors.StorageUnavailable`.
    """

    @property
    def instances(self) -> int:
        """How many broker instances use the log now, this one included: each claims at most
        its share of a subscription's concurrency, so that one instance does not hold every
        slot while the others wait for one."""
        ...

    def holds(self, item: Pending) -> bool:
        """Whether this instance may start an attempt of ``item`` now: while the claim it was
        handed out under is current (this instance renewed its lease in time and was not
        declared dead meanwhile)."""
        ...

    async def release(self, items: Sequence[Pending]) -> None:
        """Give back the claims of ``items``, which were not attempted (their sink's circuit
        opened): they are left as they were, for any instance to claim later."""
        ...

    def watch(self, listener: DueListener) -> Callable[[], None]:
        """Call ``listener`` (on the event loop) when deliveries fell due outside this instance's
        view (another instance's ingest, claims released by a dead or stopping instance, this
        instance's claims lost); returns a function that stops it."""
        ...

    async def waiting(self) -> dict[str, float]:
        """Per subscription with deliveries that no instance claims: the earliest due time of
        those. The dispatchers look at it every few seconds (a safety net under ``watch``), so
        it must cost little however long the backlog."""
        ...
