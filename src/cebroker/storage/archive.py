"""The event archive contract: every accepted event kept for the retention, and replays of it.

With a retention (``StorageOptions.retention`` > 0) the delivery log keeps every event it
accepts, matched or not, for that long after its acceptance, whether or not its deliveries are
done; :meth:`EventArchive.prune` removes what has aged out (or, past ``max_bytes``, the oldest)
a small step at a time. Without one (0) nothing changes: an event row lives only as long as its
deliveries, and an event that matched nothing is not stored.

A **replay** delivers archived events again to one subscription. It scans the archive in
acceptance order from a :class:`Position`, within its range (``since`` <= acceptance < ``until``,
and ``seq`` <= ``last_seq`` when that is set), and queues a delivery for each event the caller's
``pick`` accepts, through the subscription's normal path (the delivery log's deliveries, marked
with the replay's id: :attr:`~cebroker.storage.deliveries.Pending.replay`). It queues a
``window`` at a time: at most that many of its deliveries are in the log at once, so a replay
neither floods the log (and the backlog that ingress pushes back on) nor holds much of the
subscription's lane. Its counts follow its deliveries: ``delivered`` and ``deadlettered`` as they
leave the log, ``failed`` for each failed attempt.

Matching is the caller's: the log knows no filters. ``pick`` is called inside the queueing
transaction (on SQLite's writer thread, on PostgreSQL with the replay's row locked), so it must
be quick and do no IO.

Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a write that
raises stored nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

#: Where a scan of the archive stands: (acceptance time, seq) of the last event it passed;
#: events come in that order. ``(since, -1)`` starts at the first event accepted at ``since``.
Position = tuple[float, int]

#: ``pick(events)``: for each event to deliver, ``(seq, ordering group or None)``, in the order
#: the events were given; events left out are not delivered.
Pick = Callable[[Sequence["Archived"]], list[tuple[int, str | None]]]


@dataclass(frozen=True, slots=True)
class Archived:
    """One event held in the archive: its sequence number, acceptance time and stored JSON."""

    seq: int
    at: float
    body: bytes | str

    @property
    def position(self) -> Position:
        """The scan position just past this event."""
        return (self.at, self.seq)


@dataclass(frozen=True, slots=True)
class ArchiveStats:
    """The archive now: events held, the bytes of their JSON, the acceptance time of the oldest
    (None: empty), and the horizon before which events may be gone (the retention, or what
    ``max_bytes`` pruning removed, whichever is later)."""

    events: int
    bytes: int
    oldest: float | None
    horizon: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRequest:
    """A replay to create.

    Args:
        id: the replay's id (a request with the id of an existing replay returns that one).
        subscription: whose deliveries it queues.
        since: the earliest acceptance time included.
        until: acceptance times before this are included (pass the current time at most).
        filter: the extra filter, as the JSON text it was given in (kept for display).
        events: how many events the range held that match, counted by the caller (None: not
            counted).
        boundary: take ``last_seq`` now, once every event accepted before this call has
            committed: the replay then covers exactly what was accepted before (with events
            accepted at the same moment possibly twice). For a subscription that starts in the
            past: the events from its creation on reach it live.
    """

    id: str
    subscription: str
    since: float
    until: float
    filter: str | None = None
    events: int | None = None
    boundary: bool = False


#: The columns of a stored replay, in the order :meth:`Replay.from_row` reads them.
REPLAY_COLUMNS = (
    "id, subscription, created, since, until, last_seq, filter, events, at_time, at_seq, cancelled, "
    "scanned, queued, delivered, failed, deadlettered, removed"
)
#: The sequence bound of a replay whose range has no last event yet (the largest 64-bit one).
NO_SEQ_BOUND = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Replay:
    """A replay and its progress.

    ``queued`` deliveries were put in the log so far; ``removed`` of them were taken out again by
    a cancel; ``scanned`` says the scan has reached the end of the range. ``state``: ``running``,
    ``done`` (scanned and every delivery settled) or ``cancelled``.
    """

    id: str
    subscription: str
    created: float
    since: float
    until: float
    last_seq: int | None
    filter: str | None
    events: int | None
    position: Position
    cancelled: bool
    scanned: bool
    queued: int
    delivered: int
    failed: int
    deadlettered: int
    removed: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Replay:
        """A replay from a stored row whose columns are :data:`REPLAY_COLUMNS` (the table is the
        same on every backend; booleans may be stored as integers)."""
        return cls(
            id=str(row[0]),
            subscription=str(row[1]),
            created=float(row[2]),
            since=float(row[3]),
            until=float(row[4]),
            last_seq=None if row[5] is None else int(row[5]),
            filter=row[6],
            events=None if row[7] is None else int(row[7]),
            position=(float(row[8]), int(row[9])),
            cancelled=bool(row[10]),
            scanned=bool(row[11]),
            queued=int(row[12]),
            delivered=int(row[13]),
            failed=int(row[14]),
            deadlettered=int(row[15]),
            removed=int(row[16]),
        )

    @property
    def pending(self) -> int:
        """Deliveries of this replay still in the log."""
        return max(0, self.queued - self.delivered - self.deadlettered - self.removed)

    @property
    def state(self) -> str:
        """``running``, ``done`` or ``cancelled``."""
        if self.cancelled:
            return "cancelled"
        if self.scanned and self.pending == 0:
            return "done"
        return "running"


@dataclass(frozen=True, slots=True)
class Queued:
    """What one :meth:`EventArchive.queue` step did: deliveries queued, and whether to call
    again (``more``: the step stopped at its scan limit with room left) or not (the replay is
    scanned, cancelled, gone, its window full, or another instance is at it)."""

    queued: int
    more: bool


@runtime_checkable
class EventArchive(Protocol):
    """The archive of accepted events and the replays of it; see the module docstring."""

    @property
    def retention(self) -> float:
        """Seconds every accepted event is kept (0: the archive is off)."""
        ...

    async def stats(self) -> ArchiveStats:
        """Size, oldest event and horizon of the archive."""
        ...

    async def read(
        self, after: Position, until: float, limit: int, last_seq: int | None = None
    ) -> list[Archived]:
        """Up to ``limit`` archived events past ``after``, accepted before ``until`` (and with
        ``seq <= last_seq`` when given), in acceptance order: one page of a scan."""
        ...

    async def prune(self, before: float, max_bytes: int | None, limit: int) -> int:
        """One small step: take up to ``limit`` events out of the archive, oldest first, that
        were accepted before ``before`` or that keep the archive over ``max_bytes``; returns
        how many (fewer than ``limit``: nothing more to do now). Events a running replay has not
        scanned yet are kept past ``before`` (not past ``max_bytes``); an event whose
        deliveries are still pending leaves the archive but stays in the log for them."""
        ...

    async def create_replay(self, request: ReplayRequest) -> Replay:
        """Store a new replay (running); an existing id returns the stored one unchanged."""
        ...

    async def queue(self, replay: str, window: int, scan: int, pick: Pick) -> Queued:
        """One step of a running replay: scan up to ``scan`` events from its position and queue
        deliveries for those ``pick`` accepts, until ``window`` of its deliveries are in the
        log; the position moves past what was looked at, in one transaction with the
        deliveries. On a shared log, one instance at a time steps a replay (the others get
        ``Queued(0, False)`` meanwhile)."""
        ...

    async def replays(self, subscription: str | None) -> list[Replay]:
        """The replays of ``subscription``, oldest first; None: every replay with events left to
        queue (not cancelled, not scanned to its end), whichever subscription it is for."""
        ...

    async def cancel_replay(
        self, subscription: str, replay: str, keep: Collection[int]
    ) -> tuple[Replay, int] | None:
        """Cancel a replay of ``subscription`` (None if there is no such replay): it queues no
        more, and its deliveries still in the log are removed, except those in ``keep`` (being
        attempted here) and, on a shared log, those an instance has claimed; returns the replay
        and how many deliveries were removed. Cancelling a finished replay changes nothing."""
        ...
