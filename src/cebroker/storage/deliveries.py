"""The delivery log contract and its records.

The delivery log holds what the pipeline must not lose: accepted events, one delivery entry
per (event, matched subscription), dead letters with their reason, per-subscription counts and
the de-duplication keys of recent events. The dispatcher, the ingest path and the delivery
routes use it through :class:`DeliveryLog` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Incoming:
    """One event to commit, its de-duplication key and matched subscription ids.

    ``event`` is the JSON-form dict, or that event already serialized as JSON (bytes or str).
    """

    event: Mapping[str, Any] | bytes | str
    source: str
    id: str
    subscriptions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Appended:
    """What an ingest wrote for one event: its sequence number (0 when it matched nothing),
    acceptance time and ``(delivery id, subscription)`` pairs."""

    seq: int
    at: float
    deliveries: list[tuple[int, str]]


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


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A delivery that was given up on, with why."""

    id: int
    subscription: str
    event: dict[str, Any]
    status: str | None
    body: str | None
    attempts: int
    last_error: str
    first_at: float
    failed_at: float


@runtime_checkable
class DeliveryLog(Protocol):
    """Durable events, deliveries, dead letters and counts; the storage bundle opens and closes it.

    Durability: ``append``, ``redrive`` and ``forget`` (whose success a client or upstream is
    told) survive power loss once they return. The dispatcher's bookkeeping (``complete``,
    ``drop``, ``reschedule``, ``dead_letter``, ``purge_seen``) may be lost to a power cut, not
    to a process crash: losing it only repeats work (a confirmed delivery is delivered again).

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a write that
    raises stored nothing. ``append`` may also raise :class:`cebroker.errors.Overloaded` when
    too many writes are waiting, and TypeError for an event that cannot be serialized as JSON
    (that call alone fails; concurrent calls are not affected).
    """

    async def append(self, items: Sequence[Incoming]) -> list[Appended | None]:
        """Commit events and their deliveries, all or nothing; per event what was written, or
        None for a duplicate: an event whose ``(source, id)`` was appended within the
        backend's de-duplication window (an earlier item of the same call counts too)."""
        ...

    async def due(self, subscription: str, limit: int) -> tuple[list[Pending], float | None]:
        """Up to ``limit`` deliveries of ``subscription`` due now (earliest due first, then
        oldest) and when the next one not returned falls due (now if more are due, None if
        there are none)."""
        ...

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""
        ...

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
        """Move a delivery to the dead letters, keeping the event and the reason."""
        ...

    async def dead_letters(self, subscription: str, after: int, limit: int) -> list[DeadLetter]:
        """One page of a subscription's dead letters, oldest first, ids greater than ``after``."""
        ...

    async def redrive(self, subscription: str, ids: Sequence[int] | None) -> int:
        """Turn dead letters (all of the subscription's, or those ``ids``) back into deliveries
        due now; returns how many."""
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

    async def forget(self, subscription: str) -> int:
        """Remove everything kept for a deleted subscription; returns how many deliveries went."""
        ...

    async def purge_seen(self) -> int:
        """Forget de-duplication keys older than the window; returns how many."""
        ...
