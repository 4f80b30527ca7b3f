"""Outcomes: what became of the deliveries the dispatcher attempted (the :class:`Outcomes`
contract): confirmed, dropped, to be retried, dead-lettered or expired."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from cebroker.storage.deadletters import DeadLetter
from cebroker.storage.queue import Pending


@runtime_checkable
class Outcomes(Protocol):
    """Records the outcome of each delivery.

    Durability: this is the dispatcher's bookkeeping; it may be lost to a power cut, not to a
    process crash: losing it only repeats work (a confirmed delivery is delivered again).
    Removing a delivery of an ordering group releases the next of that group (see
    :mod:`cebroker.storage.queue`). Errors: any call may raise
    :class:`cebroker.storage.errors.StorageUnavailable`; a write that raises stored nothing.
    """

    async def complete(self, done: Sequence[tuple[int, int, str]]) -> None:
        """Remove confirmed deliveries ``(delivery id, event seq, subscription)`` and count them."""
        ...

    async def drop(self, done: Sequence[tuple[int, int]]) -> int:
        """Remove deliveries ``(delivery id, event seq)`` whose subscription no longer exists;
        returns how many were still there."""
        ...

    async def reschedule(self, item: Pending, attempts: int, next_at: float, error: str) -> None:
        """Record a failed attempt and when to try again."""
        ...

    async def dead_letter(
        self, item: Pending, event: bytes, attempts: int, error: str, status: str | None, body: str | None
    ) -> None:
        """Move a delivery to the dead letters, keeping the event and the reason (nothing if it
        has left the log meanwhile)."""
        ...

    async def expire(
        self, subscription: str, accepted_before: float, reason: str, limit: int
    ) -> tuple[list[DeadLetter], float | None]:
        """Move up to ``limit`` of the subscription's deliveries accepted before
        ``accepted_before`` to the dead letters, oldest first, each with ``reason``, no status
        and the attempts it had; returns those dead letters and when the oldest delivery still
        pending was accepted (None if none is). For deliveries that are not being attempted
        (their sink's circuit is open): the caller must not hold any of them in flight."""
        ...
