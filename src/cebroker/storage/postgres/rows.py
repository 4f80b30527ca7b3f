"""What every part of the PostgreSQL delivery log shares: the statements that write and remove
delivery rows, and what a removal leaves to settle (the next delivery of an ordering group, an
event nothing needs any more, the backlog count), in the lock order of
:mod:`~cebroker.storage.postgres.deliveries`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from cebroker.clock import Clock
from cebroker.storage.deliveries import HELD_AT
from cebroker.storage.postgres import ordering
from cebroker.storage.postgres.database import AsyncConn, Database
from cebroker.storage.postgres.instances import Membership, notify_due

NEXT_IDS = "SELECT array(SELECT nextval(%s::regclass) FROM generate_series(1, %s))"
EVENTS = (
    "INSERT INTO pipeline_events (seq, body, received, archived, trace)"
    " SELECT e.seq, e.body, %s, %s, e.trace FROM unnest(%b::bigint[], %b::text[], %b::text[])"
    " AS e (seq, body, trace)"
)
DELIVERIES = (
    "INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at, orderkey,"
    " replay) SELECT d.id, d.seq, d.sub, 0, coalesce(d.due, %s), %s, d.grp, d.replay FROM unnest("
    "%b::bigint[], %b::bigint[], %b::text[], %b::double precision[], %b::text[], %b::text[])"
    " AS d (id, seq, sub, due, grp, replay)"
)
COUNT = "UPDATE pipeline_backlog SET pending = pending + %s WHERE shard = pg_backend_pid() %% 64"
# Only an event that is not kept for the retention goes with its last delivery.
GC_EVENTS = (
    "DELETE FROM pipeline_events e WHERE e.seq = ANY(%b::bigint[]) AND NOT e.archived"
    " AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries d WHERE d.event_seq = e.seq)"
)
REPLAY_BUMP = sql.SQL("UPDATE pipeline_replays SET {col} = {col} + %s WHERE id = %s")
#: Held (shared) by every append until it commits; see the module docstring.
BOUNDARY = 0x63656272_7265706C & 0x7FFF_FFFF_FFFF_FFFF
BUMP = sql.SQL(
    "INSERT INTO pipeline_stats AS s (subscription, {col}) VALUES (%s, %s)"
    " ON CONFLICT (subscription) DO UPDATE SET {col} = s.{col} + excluded.{col}"
)
FAILED = (
    "INSERT INTO pipeline_stats AS s (subscription, failed, last_error, last_error_at) VALUES (%s, 1, %s, %s)"
    " ON CONFLICT (subscription) DO UPDATE SET failed = s.failed + 1, last_error = excluded.last_error,"
    " last_error_at = excluded.last_error_at"
)


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery row to write: its event, subscription, ordering group and replay."""

    seq: int
    subscription: str
    group: str | None = None
    replay: str | None = None


#: A delivery taken out of the log: its event seq, subscription, ordering group and replay.
Removed = tuple[int, str, str | None, str | None]


class _Rows:
    """Delivery rows gathered for one insert, with their due times (held or not)."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.seqs: list[int] = []
        self.subs: list[str] = []
        self.due: list[float | None] = []
        self.groups: list[str | None] = []
        self.replays: list[str | None] = []
        self._busy: set[tuple[str, str]] = set()

    def add(self, delivery_id: int, row: NewDelivery, busy: set[tuple[str, str]]) -> None:
        """One row; ``busy``: the groups that had deliveries in the log before this insert."""
        held = False
        if row.group is not None:
            group = (row.subscription, row.group)
            held = group in busy or group in self._busy
            self._busy.add(group)
        self.ids.append(delivery_id)
        self.seqs.append(row.seq)
        self.subs.append(row.subscription)
        self.due.append(HELD_AT if held else None)
        self.groups.append(row.group)
        self.replays.append(row.replay)

    async def insert(self, conn: AsyncConn, now: float) -> None:
        """Insert the rows, count them in the backlog and tell every instance (in a pipeline)."""
        if not self.ids:
            return
        params = (now, now, self.ids, self.seqs, self.subs, self.due, self.groups, self.replays)
        await conn.execute(DELIVERIES, params)
        await conn.execute(COUNT, (len(self.ids),))
        await notify_due(conn, set(self.subs))


class LogBase:
    """The state every part of :class:`~cebroker.storage.postgres.deliveries.PostgresDeliveryLog`
    reads (set by its constructor), and the helpers that remove and settle delivery rows."""

    _db: Database
    _clock: Clock
    _membership: Membership
    dedup_window: float
    retention: float
    #: Subscription -> (its rate, when its token bucket next holds a token), as the last claim
    #: left it empty. No claim of it can succeed before then, on any instance: the bucket is
    #: shared and refills at that rate. Asking earlier (every ingest of its events would) is a
    #: round trip that claims nothing (see :mod:`.claims`).
    _limited: dict[str, tuple[float, float]]

    def refills_at(self, subscription: str, now: float, rate: float | None = None) -> float | None:
        """When the token bucket of ``subscription``, which its last claim left empty, holds a
        token again; None if that is not after ``now`` or not known (``rate``: only if that
        claim was given this rate)."""
        known = self._limited.get(subscription)
        if known is None or now >= known[1] or (rate is not None and known[0] != rate):
            return None
        return known[1]

    async def write_deliveries(self, conn: AsyncConn, deliveries: list[NewDelivery], now: float) -> None:
        """Insert delivery rows (ids drawn here), due ``now`` or held back behind an earlier
        delivery of their ordering group, count them and tell the instances."""
        if not deliveries:
            return
        groups = [(d.subscription, d.group) for d in deliveries]
        await ordering.lock(conn, groups)
        cur = await conn.execute(NEXT_IDS, ("pipeline_deliveries_seq", len(deliveries)))
        ids = [int(i) for i in ((await cur.fetchone()) or ([],))[0]]
        busy = await ordering.busy(conn, groups)
        rows = _Rows()
        for did, delivery in zip(ids, deliveries, strict=True):
            rows.add(did, delivery, busy)
        async with conn.pipeline():
            await rows.insert(conn, now)

    async def settle(self, conn: AsyncConn, gone: list[Removed], now: float) -> None:
        """Deliveries ``gone`` were deleted in this transaction: release the next of their
        ordering groups, remove their events if nothing needs them, take them off the backlog.
        In the lock order (module docstring): the groups before the backlog shard, which comes
        last; a caller that counts stats or replays does it before (:meth:`lock_removed`)."""
        if not gone:
            return
        due = await ordering.release(conn, [(g[1], g[2]) for g in gone], now)
        async with conn.pipeline():
            await conn.execute(GC_EVENTS, (sorted({g[0] for g in gone}),))
            await conn.execute(COUNT, (-len(gone),))
        await notify_due(conn, due)

    @staticmethod
    async def lock_removed(conn: AsyncConn, gone: list[Removed]) -> None:
        """Take the locks of the ordering groups of deliveries ``gone`` (deleted in this
        transaction) now, before any stats row: the lock order of the module docstring."""
        await ordering.lock(conn, [(g[1], g[2]) for g in gone])

    @staticmethod
    async def replay_counts(conn: AsyncConn, col: str, gone: list[Removed]) -> None:
        """Add deliveries ``gone`` to the ``col`` count of their replays (in replay order: the
        rows are locked in the same order by every transaction)."""
        counts: dict[str, int] = {}
        for _, _, _, replay in gone:
            if replay is not None:
                counts[replay] = counts.get(replay, 0) + 1
        for replay, count in sorted(counts.items()):
            await conn.execute(REPLAY_BUMP.format(col=sql.Identifier(col)), (count, replay))

    @staticmethod
    async def _delete(conn: AsyncConn, where: sql.SQL, params: tuple[Any, ...]) -> list[Removed]:
        query = sql.SQL(
            "DELETE FROM pipeline_deliveries WHERE {} RETURNING event_seq, subscription, orderkey, replay"
        ).format(where)
        cur = await conn.execute(query, params)
        return [(int(r[0]), str(r[1]), r[2], r[3]) for r in await cur.fetchall()]
