"""The delivery log on PostgreSQL, shared by every broker instance on the database.

**Ingest** (``append``) commits events, their de-duplication keys and their delivery rows in one
transaction with **group commit**: the calls that arrive while a transaction is being written
wait together and go into the next one (at most :data:`MAX_GROUPS` transactions at once). A
group is one statement, ``cebroker_append``, its rows sent as arrays: one transaction, one
round trip. Inside the transaction it reads the
subscription version (a call matched against an older one gets
:class:`~cebroker.storage.errors.IndexBehind` and nothing of it is written), and a key is fresh
only if ``INSERT ... ON CONFLICT DO UPDATE ... WHERE expired`` wrote it, which holds against
concurrent instances too: the second writer of a key waits for the first to commit, then finds
it. The ingesting instance claims the fresh deliveries itself; a moment after the commit,
``NOTIFY cebroker_due`` names the subscriptions whose deliveries it left unclaimed, in a
transaction of its own (see :meth:`PostgresDeliveryLog._announce`).

**Claims** (``due``): the calls made at one moment (the loader asks for every due subscription
at once) go into one ``cebroker_claim_many``, which for each subscription, in subscription
order, locks its ``pipeline_claims`` row, so that claims of one subscription take turns over
every instance; reads from it the count of its claimed deliveries (kept by triggers) against
the concurrency; takes tokens of the rate limit; and claims due, unclaimed rows with ``FOR
UPDATE SKIP LOCKED``. A claim belongs to the instance's current id (see :mod:`.instances`): a
retry or dead letter is written only by the claim's owner, while a confirmed delivery is removed
whoever claims it now (``cebroker_complete``: one statement for a batch of completions).

The backlog is counted in ``pipeline_backlog``, one shard per connection, by every write that
adds or removes deliveries.

**Lock order.** Every transaction here and in the server functions takes its locks in one order,
so that no two wait for each other in a cycle (no ``deadlock detected``): the replays' boundary
lock; the delivery rows it removes or claims, with the claims counts their triggers keep (in
subscription order); the replays' rows (in replay order); the ordering groups' advisory locks
(in key order); the stats rows (in subscription order); the backlog and archive shards, last.
One exception: cancelling a replay locks the replay's row before it removes the replay's
unclaimed deliveries, which completions (of claimed deliveries) do not touch unless a claim was
taken over meanwhile.

With a retention every event is written ``archived`` and stays until
:class:`~cebroker.storage.postgres.archive.PostgresEventArchive` prunes it; otherwise an event
row goes with its last delivery. Every append holds a shared advisory lock (:data:`BOUNDARY`)
until it commits, so that a replay that must cover every event accepted before it can wait for
the appends in flight (:meth:`~cebroker.storage.archive.EventArchive.create_replay`). Ordering
groups: :mod:`.ordering`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from psycopg import sql

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.deliveries import HELD_AT, Appended, DeadLetter, DueListener, Incoming, Limits, Pending
from cebroker.storage.errors import IndexBehind, StorageUnavailable
from cebroker.storage.postgres import ordering
from cebroker.storage.postgres.database import AsyncConn, Database
from cebroker.storage.postgres.instances import Membership, notify_due
from cebroker.storage.postgres.listener import DUE, Listener

log = logging.getLogger("cebroker.storage")

#: Confirmed deliveries removed and counted, in one statement (see ``complete``).
COMPLETE = "SELECT cebroker_complete(%s::bigint[], %s, %s)"
#: Confirmations kept for a new id's transaction when recording them failed (see ``complete``).
MAX_UNRECORDED = 100_000
#: Transactions of ingest being written at once (each one a group of concurrent calls).
MAX_GROUPS = 2
#: Events that may wait for an ingest transaction; more are refused (503) rather than queued
#: without a bound behind commits the server does not finish.
MAX_QUEUED = 20_000
#: Seconds an ingesting instance has to claim its fresh deliveries before the others are told
#: of those it left.
ANNOUNCE_AFTER = 0.05
#: Seconds before a claim held back by another instance's claims (or locks) is tried again.
HELD_BACK = 0.25

# pg_notify(cebroker_due) naming those of the subscriptions with deliveries due and unclaimed
# (none: no notification, and the transaction writes nothing); the commit skips the flush.
ANNOUNCE = (
    "SELECT set_config('synchronous_commit', 'off', true),"
    " pg_notify(%s, CASE WHEN length(w.names) <= 7000 THEN w.names ELSE '*' END)"
    " FROM (SELECT string_agg(t.sub, ' ' ORDER BY t.sub) AS names FROM unnest(%s::text[]) AS t (sub)"
    " WHERE EXISTS (SELECT 1 FROM pipeline_deliveries d"
    " WHERE d.subscription = t.sub AND d.owner IS NULL AND d.next_at <= %s)) AS w"
    " WHERE w.names IS NOT NULL"
)
WAITING = (
    "WITH RECURSIVE subs (subscription) AS ("
    " (SELECT subscription FROM pipeline_deliveries ORDER BY subscription LIMIT 1)"
    " UNION ALL SELECT (SELECT d.subscription FROM pipeline_deliveries d"
    " WHERE d.subscription > s.subscription ORDER BY d.subscription LIMIT 1)"
    " FROM subs s WHERE s.subscription IS NOT NULL)"
    " SELECT s.subscription, (SELECT d.next_at FROM pipeline_deliveries d"
    " WHERE d.subscription = s.subscription AND d.owner IS NULL ORDER BY d.next_at LIMIT 1)"
    " FROM subs s WHERE s.subscription IS NOT NULL"
)
NEXT_IDS = "SELECT array(SELECT nextval(%s::regclass) FROM generate_series(1, %s))"
EVENTS = (
    "INSERT INTO pipeline_events (seq, body, received, archived, trace)"
    " SELECT e.seq, e.body, %s, %s, e.trace FROM unnest(%s::bigint[], %s::text[], %s::text[])"
    " AS e (seq, body, trace)"
)
DELIVERIES = (
    "INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at, orderkey,"
    " replay) SELECT d.id, d.seq, d.sub, 0, coalesce(d.due, %s), %s, d.grp, d.replay FROM unnest("
    "%s::bigint[], %s::bigint[], %s::text[], %s::double precision[], %s::text[], %s::text[])"
    " AS d (id, seq, sub, due, grp, replay)"
)
COUNT = "UPDATE pipeline_backlog SET pending = pending + %s WHERE shard = pg_backend_pid() %% 64"
# Only an event that is not kept for the retention goes with its last delivery.
GC_EVENTS = (
    "DELETE FROM pipeline_events e WHERE e.seq = ANY(%s::bigint[]) AND NOT e.archived"
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


@dataclass(slots=True)
class _Call:
    """One ``append`` waiting for a transaction."""

    items: Sequence[Incoming]
    bodies: list[str]
    version: int | None
    future: asyncio.Future[list[Appended | None]]
    result: list[Appended | None] = field(default_factory=list)
    error: BaseException | None = None


@dataclass(slots=True)
class _Claim:
    """One ``due`` waiting for a claim."""

    subscription: str
    limit: int
    limits: Limits | None
    future: asyncio.Future[tuple[list[Pending], float | None]]


def _claimed(
    claim: _Claim, rows: list[tuple[Any, ...]], owner: str, now: float
) -> tuple[list[Pending], float | None]:
    """``due``'s answer from the rows ``cebroker_claim`` returned for one subscription: the
    claimed deliveries, then one row with the next due time and the rate limit's wait."""
    items = [
        Pending(int(r[1]), int(r[2]), claim.subscription, int(r[3]), float(r[4]), r[5], owner, r[6], r[7])
        for r in rows
        if r[1] is not None
    ]
    if not rows:
        return items, now + HELD_BACK
    next_due, wait = rows[-1][8], float(rows[-1][9] or 0.0)
    if len(items) >= claim.limit:
        return items, now
    if next_due is None:
        return items, None
    if float(next_due) > now:
        return items, float(next_due)
    return items, now + (wait if wait > 0 else HELD_BACK)


def _body(event: Mapping[str, Any] | bytes | str) -> str:
    """The event's JSON text (TypeError if it cannot be serialized)."""
    if isinstance(event, str):
        return event
    if isinstance(event, bytes):
        return event.decode()
    return orjson.dumps(event).decode()


class PostgresDeliveryLog:
    """:class:`~cebroker.storage.deliveries.DeliveryLog` and
    :class:`~cebroker.storage.claims.Claims` on a PostgreSQL :class:`Database`, shared by every
    instance on it; see the module docstring."""

    def __init__(
        self,
        db: Database,
        listener: Listener,
        membership: Membership,
        *,
        dedup_window: float,
        clock: Clock = SYSTEM_CLOCK,
        retention: float = 0.0,
    ) -> None:
        self._db = db
        self._membership = membership
        self.dedup_window = dedup_window
        self.retention = retention
        self._clock = clock
        self._waiting: deque[_Call] = deque()
        #: Deliveries confirmed whose removal failed, oldest first (see ``complete``).
        self._unrecorded: dict[int, None] = {}
        #: Events of the calls in ``_waiting``.
        self._queued = 0
        self._groups = 0
        self._claims: list[_Claim] = []
        self._claiming = False
        self._announced: set[str] = set()
        self._announcer: asyncio.Task[None] | None = None
        self._listeners: list[DueListener] = []
        listener.on(DUE, self._heard)
        listener.on_connect(lambda: self._tell(None))
        membership.on_lost(lambda: self._tell(None))
        membership.before_leave(self._record_unrecorded)

    @property
    def instances(self) -> int:
        """The live instances on the database, this one included (as of the last reaping)."""
        return self._membership.instances

    # -- wake-ups ----------------------------------------------------------------------------

    def watch(self, listener: DueListener) -> Callable[[], None]:
        """Call ``listener`` with subscriptions whose deliveries wait unclaimed (None: all)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _heard(self, payload: str) -> None:
        if payload == "*":
            self._tell(None)
            return
        for subscription in payload.split():
            self._tell(subscription)

    def _tell(self, subscription: str | None) -> None:
        for listener in list(self._listeners):
            listener(subscription)

    # -- ingest ------------------------------------------------------------------------------

    async def append(self, items: Sequence[Incoming], *, version: int | None = None) -> list[Appended | None]:
        """Commit events and their deliveries with group commit; see the module docstring.

        Waits are bounded: while the server is away or hung the call fails at once (503); at
        most :data:`MAX_QUEUED` events wait for a transaction (more: 503 ``database busy``); and
        a call waiting when the server is found hung is answered 503 at once (its events may
        still be committed when the server resumes: at-least-once, a retry is a duplicate)."""
        self._db.check()
        if self._queued + len(items) > MAX_QUEUED:
            raise StorageUnavailable(
                "database busy", f"{self._queued} events wait for the database", retry_after=1.0
            )
        bodies = [_body(item.event) for item in items]  # a bad event fails this call alone
        call = _Call(items, bodies, version, asyncio.get_running_loop().create_future())
        self._waiting.append(call)
        self._queued += len(items)
        self._start_group()
        try:
            return await self._db.watchdog.bounded(call.future)
        except StorageUnavailable:
            self._unqueue(call)
            raise

    def _unqueue(self, call: _Call) -> None:
        """Take back a call that is still waiting for a transaction (its caller was answered)."""
        for index, waiting in enumerate(self._waiting):
            if waiting is call:
                del self._waiting[index]
                self._queued -= len(call.items)
                return

    def _start_group(self) -> None:
        if self._waiting and self._groups < MAX_GROUPS:
            calls = list(self._waiting)
            self._waiting.clear()
            self._queued = 0
            self._groups += 1
            asyncio.create_task(self._commit(calls))

    async def _commit(self, calls: list[_Call]) -> None:
        try:
            await self._write(calls)
        except BaseException as exc:  # the transaction did not commit: nobody's events are in
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for call in calls:
                if call.future.done():
                    continue  # the caller was cancelled meanwhile
                if call.error is not None:
                    call.future.set_exception(call.error)
                else:
                    call.future.set_result(call.result)
        finally:
            self._groups -= 1
            self._start_group()

    async def _write(self, calls: list[_Call]) -> None:
        """One transaction, one statement, one round trip (``cebroker_append``) for the group."""
        now = self._clock.now()
        versions: list[int | None] = []
        tenants: list[str] = []
        sources: list[str] = []
        ids: list[str] = []
        bodies: list[str] = []
        traces: list[str | None] = []
        traced = False
        d_items: list[int] = []
        d_subs: list[str] = []
        d_groups: list[str | None] = []
        for call in calls:
            for item, body in zip(call.items, call.bodies, strict=True):
                versions.append(call.version)
                tenants.append(item.tenant)
                sources.append(item.source)
                ids.append(item.id)
                bodies.append(body)
                traces.append(item.trace)
                traced = traced or item.trace is not None
                item_groups = item.groups or (None,) * len(item.subscriptions)
                for sub, group in zip(item.subscriptions, item_groups, strict=True):
                    d_items.append(len(sources))  # 1-based, as SQL arrays
                    d_subs.append(sub)
                    d_groups.append(group)
        if not sources:
            for call in calls:
                call.result = []
            return
        rows = await self._db.call(
            "SELECT * FROM cebroker_append(%s, %s, %s::bigint[], %s::text[], %s::text[], %s::text[],"
            " %s::text[], %s::text[], %s::int[], %s::text[], %s::text[], %s, %s, %s)",
            (
                now,
                now - self.dedup_window,
                versions,
                tenants,
                sources,
                ids,
                bodies,
                traces if traced else None,  # no array at all when nothing is traced
                d_items,
                d_subs,
                d_groups,
                self.retention > 0,  # every event kept for the retention, matched or not
                HELD_AT,
                BOUNDARY,
            ),
        )
        latest = int(rows[0][4])
        written: dict[int, tuple[int, list[tuple[int, str]]]] = {}
        for item, seq, delivery, sub, _ in rows[1:]:
            seqs, pairs = written.setdefault(int(item), (int(seq or 0), []))
            if delivery is not None:
                pairs.append((int(delivery), str(sub)))
        self._announce({sub for _, pairs in written.values() for _, sub in pairs})
        position = 0
        for call in calls:
            first, position = position, position + len(call.items)
            if call.version is not None and call.version < latest:
                call.error = IndexBehind(latest)  # nothing of it was written
                continue
            out: list[Appended | None] = []
            for number in range(first + 1, position + 1):
                found = written.get(number)
                out.append(None if found is None else Appended(found[0], now, found[1], held=False))
            call.result = out

    def _announce(self, subscriptions: set[str]) -> None:
        """Tell the other instances, a moment after the append committed, which of
        ``subscriptions`` still have deliveries nobody claimed.

        The ingesting instance claims its fresh deliveries at once (its dispatcher is told by
        the append's answer); only what it leaves, because its share of a subscription is
        taken, is announced, :data:`ANNOUNCE_AFTER` later, so that instances do not all race for
        every fresh delivery. The notification is sent in a transaction of its own that skips
        the flush, never inside the ingest's: the server serializes the commits of notifying
        transactions, and ingest commits wait for theirs. A notification lost with this
        instance costs the others a rescan's delay."""
        self._announced |= subscriptions
        if self._announced and self._announcer is None:
            self._announcer = asyncio.create_task(self._announce_all(), name="cebroker-announce")

    async def _announce_all(self) -> None:
        try:
            while self._announced:
                await asyncio.sleep(ANNOUNCE_AFTER)
                subscriptions, self._announced = self._announced, set()
                try:
                    await self._db.call(ANNOUNCE, (DUE, sorted(subscriptions), self._clock.now()))
                except StorageUnavailable as exc:
                    log.debug("announcing deliveries failed: %s", exc)
        finally:
            self._announcer = None

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

    # -- dispatch ----------------------------------------------------------------------------

    def holds(self, item: Pending) -> bool:
        """Whether ``item``'s claim is this instance's current one and its lease is fresh."""
        return item.owner == self._membership.id and self._membership.live

    async def due(
        self, subscription: str, limit: int, limits: Limits | None = None
    ) -> tuple[list[Pending], float | None]:
        """Claim up to ``limit`` due deliveries of ``subscription`` within ``limits``. The calls
        made while a claim is being written go together into the next one (one statement, one
        round trip for every subscription)."""
        now = self._clock.now()
        if self._membership.id is None or not self._membership.live or limit <= 0:
            return [], now + HELD_BACK
        claim = _Claim(subscription, limit, limits, asyncio.get_running_loop().create_future())
        self._claims.append(claim)
        if not self._claiming:
            self._claiming = True
            asyncio.create_task(self._claim_all())  # runs after the other calls of this moment
        return await claim.future

    async def _claim_all(self) -> None:
        try:
            while self._claims:
                batch: dict[str, _Claim] = {}
                again: list[_Claim] = []
                for claim in self._claims:  # a subscription asked for twice waits for the next
                    if claim.subscription in batch:
                        again.append(claim)
                    else:
                        batch[claim.subscription] = claim
                self._claims = again
                await self._claim(list(batch.values()))
        finally:
            self._claiming = False

    async def _claim(self, batch: list[_Claim]) -> None:
        now = self._clock.now()
        owner = self._membership.id
        if owner is None or not self._membership.live:
            for claim in batch:
                if not claim.future.done():
                    claim.future.set_result(([], now + HELD_BACK))
            return
        try:
            rows = await self._db.call(
                "SELECT * FROM cebroker_claim_many(%s, %s, %s, %s::int[], %s::int[], %s::float8[])",
                (
                    [c.subscription for c in batch],
                    owner,
                    now,
                    [c.limit for c in batch],
                    [c.limits.concurrency if c.limits is not None else None for c in batch],
                    [c.limits.rate if c.limits is not None else None for c in batch],
                ),
            )
        except BaseException as exc:
            if isinstance(exc, StorageUnavailable):
                self._membership.suspect()  # it may have committed: never leave a claim unused
            for claim in batch:
                if not claim.future.done():
                    claim.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        found: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            found.setdefault(str(row[0]), []).append(row)
        for claim in batch:
            result = _claimed(claim, found.get(claim.subscription, []), owner, now)
            if not claim.future.done():
                claim.future.set_result(result)

    async def release(self, items: Sequence[Pending]) -> None:
        """Give back the claims of deliveries that were not attempted; the others hear of them."""
        mine = [item.id for item in items if item.owner]
        if not mine:
            return
        owner = items[0].owner

        async def job(conn: AsyncConn) -> None:
            cur = await conn.execute(
                "UPDATE pipeline_deliveries SET owner = NULL WHERE id = ANY(%s::bigint[]) AND owner = %s"
                " RETURNING subscription",
                (mine, owner),
            )
            await notify_due(conn, {str(r[0]) for r in await cur.fetchall()})

        await self._db.run(job, durable=False)

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(
                "SELECT subscription, count(*), min(next_at) FROM pipeline_deliveries GROUP BY subscription"
            )
            return await cur.fetchall()

        return {str(r[0]): (int(r[1]), float(r[2])) for r in await self._db.run(job, write=False)}

    async def waiting(self) -> dict[str, float]:
        """Per subscription with unclaimed deliveries, the earliest due time of those: a skip
        scan of the due index (one probe per subscription), not a scan of the backlog."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(WAITING)
            return await cur.fetchall()

        return {str(r[0]): float(r[1]) for r in await self._db.run(job, write=False) if r[1] is not None}

    async def pending(self) -> int:
        """Deliveries in the log, every instance's together."""

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute("SELECT coalesce(sum(pending), 0) FROM pipeline_backlog")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

        return await self._db.run(job, write=False)

    async def take(self, key: str, rate: float) -> float:
        """A token of the bucket ``key``, shared by every instance."""
        if rate <= 0:
            raise ValueError(f"a rate is positive, not {rate}")
        now = self._clock.now()

        async def job(conn: AsyncConn) -> float:
            cur = await conn.execute("SELECT cebroker_take(%s, %s, %s)", (key, rate, now))
            row = await cur.fetchone()
            return float(row[0]) if row else 0.0

        return await self._db.run(job, durable=False)

    async def complete(self, done: Sequence[tuple[int, int, str]]) -> None:
        """Remove confirmed deliveries and count them (whoever claims them now), in one statement
        (which also frees the next delivery of their ordering groups and counts their replays).

        Confirmations that fail (the database is away) are also kept here, at most
        :data:`MAX_UNRECORDED` of them: should this instance take a new id when the database
        returns, it records them before its old claims are freed (:meth:`_record_unrecorded`),
        so another instance does not send them again. The caller retries them too."""
        ids = [d[0] for d in done]
        try:
            await self._db.call(COMPLETE, (ids, self._clock.now(), HELD_AT))
        except StorageUnavailable:
            for delivery in ids:
                self._unrecorded[delivery] = None
            while len(self._unrecorded) > MAX_UNRECORDED:  # the oldest go first
                del self._unrecorded[next(iter(self._unrecorded))]
            raise
        if self._unrecorded:
            for delivery in ids:
                self._unrecorded.pop(delivery, None)

    async def _record_unrecorded(self, conn: AsyncConn) -> None:
        """In the transaction that frees this instance's old claims, before: record the
        confirmations that failed while the database was away."""
        if self._unrecorded:
            ids, self._unrecorded = list(self._unrecorded), {}
            await conn.execute(COMPLETE, (ids, self._clock.now(), HELD_AT))
            log.info("recorded %d deliveries confirmed while the database was away", len(ids))

    async def drop(self, done: Sequence[tuple[int, int]]) -> int:
        """Remove deliveries of deleted subscriptions; returns how many were still there."""
        ids = [d[0] for d in done]
        now = self._clock.now()

        async def job(conn: AsyncConn) -> int:
            gone = await self._delete(conn, sql.SQL("id = ANY(%s::bigint[])"), (ids,))
            await self.settle(conn, gone, now)
            return len(gone)

        return await self._db.run(job, durable=False)

    @staticmethod
    async def _delete(conn: AsyncConn, where: sql.SQL, params: tuple[Any, ...]) -> list[Removed]:
        query = sql.SQL(
            "DELETE FROM pipeline_deliveries WHERE {} RETURNING event_seq, subscription, orderkey, replay"
        ).format(where)
        cur = await conn.execute(query, params)
        return [(int(r[0]), str(r[1]), r[2], r[3]) for r in await cur.fetchall()]

    async def reschedule(self, item: Pending, attempts: int, next_at: float, error: str) -> None:
        """Record a failed attempt and when to try again; the claim is given back."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> None:
            async with conn.pipeline():
                await conn.execute(
                    "UPDATE pipeline_deliveries SET attempts = %s, next_at = %s, last_error = %s,"
                    " owner = NULL WHERE id = %s AND (owner IS NULL OR owner = %s)",
                    (attempts, next_at, error, item.id, item.owner),
                )
                if item.replay is not None:  # the replay's row before the stats row (lock order)
                    await conn.execute(REPLAY_BUMP.format(col=sql.Identifier("failed")), (1, item.replay))
                await conn.execute(FAILED, (item.subscription, error, now))

        await self._db.run(job, durable=False)

    async def dead_letter(
        self, item: Pending, event: bytes, attempts: int, error: str, status: str | None, body: str | None
    ) -> None:
        """Move a delivery this instance claims to the dead letters, keeping the reason."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> None:
            gone = await self._delete(
                conn, sql.SQL("id = %s AND (owner IS NULL OR owner = %s)"), (item.id, item.owner)
            )
            # in the lock order: the replay's row, the group, the stats rows, the backlog shard
            async with conn.pipeline():
                await self.replay_counts(conn, "deadlettered", gone)
                if item.replay is not None:
                    await conn.execute(REPLAY_BUMP.format(col=sql.Identifier("failed")), (1, item.replay))
            await self.lock_removed(conn, gone)
            async with conn.pipeline():
                if gone:
                    await conn.execute(
                        "INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts,"
                        " last_error, first_at, failed_at, trace)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (
                            item.subscription,
                            event.decode(),
                            status,
                            body,
                            attempts,
                            error,
                            item.first_at,
                            now,
                            item.trace,
                        ),
                    )
                    await conn.execute(
                        BUMP.format(col=sql.Identifier("deadlettered")), (item.subscription, 1)
                    )
                await conn.execute(FAILED, (item.subscription, error, now))
            await self.settle(conn, gone, now)

        await self._db.run(job, durable=False)

    async def expire(
        self, subscription: str, accepted_before: float, reason: str, limit: int
    ) -> tuple[list[DeadLetter], float | None]:
        """Dead-letter up to ``limit`` unclaimed deliveries accepted before ``accepted_before``,
        oldest first (one statement); the dead letters made and the oldest acceptance time still
        pending. Claimed ones are being attempted by an instance and left to it."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> tuple[list[tuple[Any, ...]], float | None]:
            cur = await conn.execute(
                "WITH gone AS (DELETE FROM pipeline_deliveries WHERE id IN ("
                " SELECT id FROM pipeline_deliveries WHERE subscription = %s AND owner IS NULL"
                " AND first_at < %s ORDER BY first_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
                " RETURNING id, event_seq, attempts, first_at, orderkey, replay),"
                " made AS (INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts,"
                " last_error, first_at, failed_at, trace)"
                " SELECT %s, e.body, NULL, NULL, g.attempts, %s, g.first_at, %s, e.trace"
                " FROM gone g JOIN pipeline_events e ON e.seq = g.event_seq ORDER BY g.first_at, g.id"
                " RETURNING id, event, attempts, first_at)"
                " SELECT m.id, m.event, m.attempts, m.first_at, r.seqs, r.groups, r.replays FROM made m,"
                " (SELECT array_agg(g.event_seq ORDER BY g.id) AS seqs, array_agg(g.orderkey ORDER BY g.id)"
                " AS groups, array_agg(g.replay ORDER BY g.id) AS replays FROM gone g) AS r",
                (subscription, accepted_before, limit, subscription, reason, now),
            )
            made = await cur.fetchall()
            if made:
                seqs, groups, replays = made[0][4], made[0][5], made[0][6]
                gone: list[Removed] = [
                    (int(seq), subscription, group, replay)
                    for seq, group, replay in zip(seqs, groups, replays, strict=True)
                ]
                # in the lock order: the replays' rows, the groups, the stats row, the backlog
                async with conn.pipeline():
                    await self.replay_counts(conn, "deadlettered", gone)
                await self.lock_removed(conn, gone)
                await conn.execute(BUMP.format(col=sql.Identifier("deadlettered")), (subscription, len(made)))
                # the next delivery of each ordering group, the events nothing needs, the backlog
                await self.settle(conn, gone, now)
            cur = await conn.execute(
                "SELECT min(first_at) FROM pipeline_deliveries WHERE subscription = %s", (subscription,)
            )
            row = await cur.fetchone()
            return made, None if row is None or row[0] is None else float(row[0])

        made, oldest = await self._db.run(job, durable=False)
        letters = [
            DeadLetter(
                int(r[0]), subscription, orjson.loads(r[1]), None, None, int(r[2]), reason, float(r[3]), now
            )
            for r in made
        ]
        return sorted(letters, key=lambda d: (d.first_at, d.id)), oldest

    # -- dead letters, status, housekeeping --------------------------------------------------

    async def dead_letters(self, subscription: str, after: int, limit: int) -> list[DeadLetter]:
        """One page of a subscription's dead letters, oldest first, ids greater than ``after``."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(
                "SELECT id, subscription, event, status, body, attempts, last_error, first_at, failed_at"
                " FROM pipeline_deadletters WHERE subscription = %s AND id > %s ORDER BY id LIMIT %s",
                (subscription, after, limit),
            )
            return await cur.fetchall()

        rows = await self._db.run(job, write=False)
        return [
            DeadLetter(int(r[0]), str(r[1]), orjson.loads(r[2]), r[3], r[4], int(r[5]), str(r[6]), r[7], r[8])
            for r in rows
        ]

    async def redrive(self, subscription: str, ids: Sequence[int] | None) -> int:
        """Turn dead letters back into deliveries due now; returns how many."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> int:
            picked = sql.SQL("AND id = ANY(%s::bigint[])" if ids is not None else "")
            params: tuple[Any, ...] = (subscription, list(ids)) if ids is not None else (subscription,)
            cur = await conn.execute(
                sql.SQL(
                    "DELETE FROM pipeline_deadletters WHERE subscription = %s {} RETURNING id, event, trace"
                ).format(picked),
                params,
            )
            rows = sorted(await cur.fetchall())
            if not rows:
                return 0
            cur = await conn.execute(NEXT_IDS, ("pipeline_events_seq", len(rows)))
            seqs = [int(s) for s in ((await cur.fetchone()) or ([],))[0]]
            cur = await conn.execute(NEXT_IDS, ("pipeline_deliveries_seq", len(rows)))
            dids = [int(s) for s in ((await cur.fetchone()) or ([],))[0]]
            none: list[Any] = [None] * len(rows)
            async with conn.pipeline():
                await conn.execute(
                    EVENTS, (now, False, seqs, [str(r[1]) for r in rows], [r[2] for r in rows])
                )
                params = (now, now, dids, seqs, [subscription] * len(rows), none, none, none)
                await conn.execute(DELIVERIES, params)
                await conn.execute(COUNT, (len(rows),))
                await notify_due(conn, {subscription})
            return len(rows)

        return await self._db.run(job)

    async def status(self, subscription: str) -> dict[str, Any]:
        """Counts and the last error of one subscription (the same on every instance)."""

        async def job(conn: AsyncConn) -> dict[str, Any]:
            cur = await conn.execute(
                "SELECT (SELECT count(*) FROM pipeline_deliveries WHERE subscription = %s),"
                " (SELECT count(*) FROM pipeline_deadletters WHERE subscription = %s)",
                (subscription, subscription),
            )
            pending, dead = await cur.fetchone() or (0, 0)
            cur = await conn.execute(
                "SELECT delivered, failed, deadlettered, last_error, last_error_at FROM pipeline_stats"
                " WHERE subscription = %s",
                (subscription,),
            )
            row = await cur.fetchone() or (0, 0, 0, None, None)
            return {
                "delivered": int(row[0]),
                "failed": int(row[1]),
                "pending": int(pending),
                "deadlettered": int(dead),
                "deadletteredTotal": int(row[2]),
                "lastError": row[3],
                "lastErrorAt": row[4],
            }

        return await self._db.run(job, write=False)

    async def statuses(self) -> dict[str, dict[str, Any]]:
        """:meth:`status` of every subscription the log knows anything about, in one snapshot."""

        async def job(conn: AsyncConn) -> dict[str, dict[str, Any]]:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            found: dict[str, dict[str, Any]] = {}

            def entry(subscription: str) -> dict[str, Any]:
                blank: dict[str, Any] = {"delivered": 0, "failed": 0, "pending": 0, "deadlettered": 0}
                blank.update(deadletteredTotal=0, lastError=None, lastErrorAt=None)
                return found.setdefault(subscription, blank)

            cur = await conn.execute("SELECT subscription, count(*) FROM pipeline_deliveries GROUP BY 1")
            for sub, count in await cur.fetchall():
                entry(str(sub))["pending"] = int(count)
            cur = await conn.execute("SELECT subscription, count(*) FROM pipeline_deadletters GROUP BY 1")
            for sub, count in await cur.fetchall():
                entry(str(sub))["deadlettered"] = int(count)
            cur = await conn.execute(
                "SELECT subscription, delivered, failed, deadlettered, last_error, last_error_at"
                " FROM pipeline_stats"
            )
            for row in await cur.fetchall():
                entry(str(row[0])).update(
                    delivered=int(row[1]),
                    failed=int(row[2]),
                    deadletteredTotal=int(row[3]),
                    lastError=row[4],
                    lastErrorAt=row[5],
                )
            return found

        return await self._db.run(job, write=False)

    async def forget(self, subscription: str) -> int:
        """Delete everything kept for a deleted subscription; returns the pending count removed."""

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute(
                "DELETE FROM pipeline_deliveries WHERE subscription = %s RETURNING event_seq", (subscription,)
            )
            gone = [int(r[0]) for r in await cur.fetchall()]
            # in the lock order: the replays' rows, the stats row, the backlog shard last
            async with conn.pipeline():
                await conn.execute("DELETE FROM pipeline_replays WHERE subscription = %s", (subscription,))
                await conn.execute(
                    "DELETE FROM pipeline_deadletters WHERE subscription = %s", (subscription,)
                )
                await conn.execute("DELETE FROM pipeline_stats WHERE subscription = %s", (subscription,))
                await conn.execute(
                    "DELETE FROM pipeline_buckets WHERE key = %s", (f"subscription {subscription}",)
                )
                await conn.execute("DELETE FROM pipeline_claims WHERE subscription = %s", (subscription,))
                if gone:
                    await conn.execute(GC_EVENTS, (gone,))
                    await conn.execute(COUNT, (-len(gone),))
            return len(gone)

        return await self._db.run(job)

    async def purge_seen(self) -> int:
        """Forget de-duplication keys older than the window."""
        horizon = self._clock.now() - self.dedup_window

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute("DELETE FROM pipeline_seen WHERE at < %s", (horizon,))
            return cur.rowcount

        return await self._db.run(job, durable=False)
