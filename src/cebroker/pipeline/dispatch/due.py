"""When the deliveries each subscription has waiting in the log fall due: the loader's agenda.

Fresh deliveries go straight from a committed ingest into their lane; every part that leaves a
delivery in the log instead (a retry, a delivery let go while its sink's circuit is open, one
that did not fit in its lane, one whose outcome could not be recorded, an ordering group's next)
says so here with :meth:`DueTimes.schedule`, and the loader (:mod:`.loader`) reads the table and
sleeps until the next due time or a wake-up. Being its own object, it is made before every part
that writes it, and none of them needs the loader.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

from cebroker.storage.deliveries import HELD_AT
from cebroker.subscription import Subscription


class DueTimes:
    """Per subscription with deliveries waiting in the log that memory does not hold: when the
    earliest of them falls due; ``subscriptions`` is the live view of subscriptions."""

    def __init__(self, subscriptions: Mapping[str, Subscription]) -> None:
        self._subscriptions = subscriptions
        #: Subscription -> when its earliest delivery waiting in the log falls due.
        self._due: dict[str, float] = {}
        #: Set when the loader should look again before its next due time.
        self.wakeup = asyncio.Event()

    def waiting(self, subscription: str) -> bool:
        """Whether ``subscription`` has deliveries in the log that are not in memory."""
        return subscription in self._due

    def held_back(self, subscription: str) -> bool:
        """Whether the deliveries of ``subscription`` left in the log all wait for one before
        them in their ordering group (only a delivery leaving the log lets the next go)."""
        return self._due.get(subscription, 0.0) >= HELD_AT

    def schedule(self, subscription: str, at: float) -> None:
        """A delivery of ``subscription`` waits in the log and falls due at ``at`` (0: now).
        A PULL subscription's deliveries wait for their consumers: never loaded, never pushed."""
        current = self._subscriptions.get(subscription)
        if current is not None and current.pull:
            return
        self._due[subscription] = min(self._due.get(subscription, math.inf), at)
        self.wakeup.set()

    def wake(self) -> None:
        """Look again now (a lane made room)."""
        self.wakeup.set()

    def forget(self, subscription: str) -> None:
        """Nothing more to load for ``subscription`` (deleted)."""
        self._due.pop(subscription, None)

    def items(self) -> list[tuple[str, float]]:
        """Every subscription with deliveries waiting, with its due time (a copy)."""
        return list(self._due.items())

    def loaded(self, subscription: str, due_at: float, later: float | None) -> None:
        """The loader read what was due at ``due_at``; ``later`` is when the next delivery left
        in the log falls due (None: none is left). A delivery scheduled meanwhile keeps its time."""
        if self._due.get(subscription) == due_at:
            if later is None:
                del self._due[subscription]
            else:
                self._due[subscription] = later
