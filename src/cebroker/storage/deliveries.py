"""The delivery log contract and its records.

The delivery log holds what the pipeline must not lose: accepted events, one delivery entry
per (event, matched subscription), dead letters with their reason, per-subscription counts and
the de-duplication keys of recent events (per publishing tenant, source and id). The
dispatcher, the ingest path and the delivery routes use it through :class:`DeliveryLog` only.

A log is **shared** when several broker instances use it at once (a database server). Then each
due delivery is *claimed* by one instance (``due``), the claims of an instance that stops
renewing them return to the others after a lease, a subscription's concurrency and rate limit
are enforced by the log for all instances together (``Limits``), and instances hear of
deliveries that fell due elsewhere through ``watch``. An unshared log (one process, SQLite)
answers the same calls trivially: its one dispatcher already sees everything.

**Ordering groups.** A delivery may belong to an ordering group (``Incoming.groups``): the
deliveries of one subscription with the same group are handed out one at a time, lowest id
first. The log holds the later ones back (their due time is :data:`HELD_AT`, so neither ``due``
nor a claim returns them) until the one before has left the log, confirmed or dead-lettered;
its removal releases the next, due at once. The order therefore holds across retries, restarts
and, on a shared log, across instances.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

#: The due time of a delivery held back behind an earlier one of its ordering group: later than
#: any real time, so it is never due and never claimed until the log releases it.
HELD_AT = 1e18


@dataclass(frozen=True, slots=True)
class Incoming:
    """One event to commit, its de-duplication key and matched subscription ids.

    ``event`` is the JSON-form dict, or that event already serialized as JSON (bytes or str).
    ``groups``, when not empty, has one entry per subscription: the ordering group of that
    subscription's delivery (None: unordered); see the module docstring. ``tenant`` is the
    publishing tenant ("" for none: the operator's own sources, an admin, no authentication):
    an event is a duplicate only of an earlier one with the same ``(tenant, source, id)``, so
    that one tenant cannot suppress another's events by publishing their ids first.
    """

    event: Mapping[str, Any] | bytes | str
    source: str
    id: str
    subscriptions: tuple[str, ...]
    groups: tuple[str | None, ...] = ()
    tenant: str = ""
    #: The event's trace context, kept with it for every delivery attempt: the publish span's
    #: ``traceparent``, then ``;tracestate`` if any (None: not traced).
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class Appended:
    """What an ingest wrote for one event: its sequence number (0 when nothing of it was
    stored: it matched nothing and the archive is off), acceptance time and ``(delivery id,
    subscription)`` pairs."""

    seq: int
    at: float
    deliveries: list[tuple[int, str]]
    #: Whether this instance holds the deliveries and may start them at once (an unshared log);
    #: otherwise they wait in the log for a claim (``due``). Deliveries with an ordering group
    #: always wait for ``due``, whatever this says: the log decides which of a group goes next.
    held: bool = True


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
    #: The claim this delivery was handed out under ("" for an unshared log): see ``holds``.
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


#: Told about deliveries waiting in a shared log: a subscription id, or None for "look at all".
DueListener = Callable[[str | None], None]


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
    ``drop``, ``reschedule``, ``dead_letter``, ``expire``, ``purge_seen``) may be lost to a power cut, not
    to a process crash: losing it only repeats work (a confirmed delivery is delivered again).

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a write that
    raises stored nothing. ``append`` may also raise :class:`cebroker.errors.Overloaded` when
    too many writes are waiting, and TypeError for an event that cannot be serialized as JSON
    (that call alone fails; concurrent calls are not affected).
    """

    @property
    def shared(self) -> bool:
        """Whether other broker instances use this log too (see the module docstring)."""
        ...

    @property
    def instances(self) -> int:
        """How many broker instances use the log now, this one included (1 for an unshared
        log): each claims at most its share of a subscription's concurrency, so that one
        instance does not hold every slot while the others wait for one."""
        ...

    async def append(self, items: Sequence[Incoming], *, version: int | None = None) -> list[Appended | None]:
        """Commit events and their deliveries, all or nothing; per event what was written, or
        None for a duplicate: an event whose ``(source, id)`` was appended within the
        backend's de-duplication window (an earlier item of the same call counts too).

        ``version`` is the subscription store's ``version`` the items were matched at. A shared
        log checks it inside the append's transaction and raises
        :class:`~cebroker.storage.errors.IndexBehind` (storing nothing) when a later
        subscription change has committed: the caller catches up and matches again. An
        unshared log's index cannot be behind (its feed is synchronous) and ignores it."""
        ...

    async def due(
        self, subscription: str, limit: int, limits: Limits | None = None
    ) -> tuple[list[Pending], float | None]:
        """Up to ``limit`` deliveries of ``subscription`` due now (earliest due first, then
        oldest) and when the next one not returned falls due (now if more are due, None if
        there are none).

        A shared log claims what it returns for this instance, within ``limits`` over all
        instances, and returns nothing already claimed; when the limits hold deliveries back
        the next time is when a claim may succeed. An unshared log returns rows in memory too
        (the dispatcher skips those) and leaves ``limits`` to the dispatcher."""
        ...

    async def release(self, items: Sequence[Pending]) -> None:
        """Give back the claims of ``items``, which were not attempted (their sink's circuit
        opened): they are left as they were, for any instance to claim later. Nothing to do for
        an unshared log."""
        ...

    def holds(self, item: Pending) -> bool:
        """Whether this instance may start an attempt of ``item`` now: always for an unshared
        log; for a shared one, while the claim it was handed out under is current (this
        instance renewed its lease in time and was not declared dead meanwhile)."""
        ...

    def watch(self, listener: DueListener) -> Callable[[], None]:
        """Call ``listener`` (on the event loop) when deliveries fell due outside this instance's
        view (another instance's ingest, claims released by a dead or stopping instance, this
        instance's claims lost); returns a function that stops it. An unshared log never calls it."""
        ...

    async def pending(self) -> int:
        """Deliveries in the log, every instance's together (the shared backlog)."""
        ...

    async def take(self, key: str, rate: float) -> float:
        """Take one token from the bucket ``key`` (``rate`` per second, a burst of one second's
        worth), shared by every instance of the log: 0.0 when taken, else the seconds to wait
        before one is there (nothing was taken)."""
        ...

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""
        ...

    async def waiting(self) -> dict[str, float]:
        """Per subscription with deliveries that no instance claims: the earliest due time of
        those. A shared log's dispatchers look at it every few seconds (a safety net under
        ``watch``), so it must cost little however long the backlog; an unshared log answers
        from ``backlog``."""
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
