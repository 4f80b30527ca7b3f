"""Ingest on PostgreSQL (``append``): events, their de-duplication keys and their delivery rows
in one transaction, with **group commit**: the calls that arrive while a transaction is being
written wait together and go into the next one, which the task of the transaction that ends
starts at once. A second transaction beside the one being written starts only once that one is
long (written for :data:`SECOND_AFTER`, or holding :data:`SECOND_AT` events): larger groups cost
the server and this process less per event, and an append held by another writer's locks, or
a batch, still does not hold the others up; at most :data:`MAX_GROUPS` transactions at once.
The group's task answers each call's ``durable`` callback as soon as the group committed, before
it wakes the callers. A group is one statement, its rows sent as arrays: one transaction, one round trip:
``cebroker_append_distinct`` when no two of its events have the same key and no delivery has an
ordering group (deliveries schema step 9: fewer parts for the server), else ``cebroker_append``.
Inside the transaction it reads the subscription version (a call matched against an older one
gets :class:`~cebroker.storage.errors.IndexBehind` and nothing of it is
written), and a key is fresh only if ``INSERT ... ON CONFLICT DO UPDATE ... WHERE expired``
wrote it, which holds against concurrent instances too: the second writer of a key waits for
the first to commit, then finds it. The ingesting instance claims the fresh deliveries itself;
a moment after the commit, ``NOTIFY cebroker_due`` names the subscriptions whose deliveries it
left unclaimed, in a transaction of its own (see :meth:`PostgresIngest._announce`).

Every append holds a shared advisory lock (:data:`~.rows.BOUNDARY`) until it commits, so that a
replay that must cover every event accepted before it can wait for the appends in flight
(:meth:`~cebroker.storage.archive.EventArchive.create_replay`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from cebroker.storage.deliveries import HELD_AT, Appended, Incoming
from cebroker.storage.errors import IndexBehind, StorageUnavailable
from cebroker.storage.postgres.listener import DUE
from cebroker.storage.postgres.rows import BOUNDARY, LogBase

log = logging.getLogger("cebroker.storage")

#: Transactions of ingest being written at once (each one a group of concurrent calls).
MAX_GROUPS = 2
#: Seconds an ingest transaction is written alone before calls waiting for the next one get a
#: second transaction beside it (see :meth:`PostgresIngest._start_group`).
SECOND_AFTER = 0.005
#: Events in a transaction that give the calls waiting a second transaction at once (a batch's
#: transaction is long; single events should not wait behind it).
SECOND_AT = 32
#: Events that may wait for an ingest transaction; more are refused (503) rather than queued
#: without a bound behind commits the server does not finish.
MAX_QUEUED = 20_000
#: Seconds an ingesting instance has to claim its fresh deliveries before the others are told
#: of those it left.
ANNOUNCE_AFTER = 0.05

# pg_notify(cebroker_due) naming those of the subscriptions with deliveries due and unclaimed
# (none: no notification, and the transaction writes nothing); the commit skips the flush.
# cebroker_due_among (deliveries schema step 8) probes each subscription's due index; the
# EXISTS this statement held before was planned from a queue's statistics, and with a backlog
# it read the whole log for each announcement.
ANNOUNCE = (
    "SELECT set_config('synchronous_commit', 'off', true),"
    " pg_notify(%s, CASE WHEN length(w.names) <= 7000 THEN w.names ELSE '*' END)"
    " FROM (SELECT cebroker_due_among(%b::text[], %s) AS names) AS w WHERE w.names IS NOT NULL"
)


@dataclass(slots=True)
class _Call:
    """One ``append`` waiting for a transaction."""

    items: Sequence[Incoming]
    bodies: list[str]
    version: int | None
    future: asyncio.Future[list[Appended | None]]
    #: Called with the result by the group's task, as soon as the group committed.
    durable: Callable[[list[Appended | None]], None] | None = None
    result: list[Appended | None] = field(default_factory=list)
    error: BaseException | None = None


def _body(event: Mapping[str, Any] | bytes | str) -> str:
    """The event's JSON text (TypeError if it cannot be serialized)."""
    if isinstance(event, str):
        return event
    if isinstance(event, bytes):
        return event.decode()
    return orjson.dumps(event).decode()


class PostgresIngest(LogBase):
    """``append`` with group commit (:class:`~cebroker.storage.ingest.Ingest`)."""

    _waiting: deque[_Call]
    _queued: int
    _groups: int
    _forming: bool
    #: Per ingest transaction being written: the event loop's time from which it counts as long.
    _long_at: dict[object, float]
    _second: asyncio.TimerHandle | None
    _announced: set[str]
    _announcer: asyncio.Task[None] | None

    async def append(
        self,
        items: Sequence[Incoming],
        *,
        version: int | None = None,
        durable: Callable[[list[Appended | None]], None] | None = None,
    ) -> list[Appended | None]:
        """Commit events and their deliveries with group commit; see the module docstring.
        ``durable`` is called by the group's task as soon as the group committed, before the
        caller wakes up (a turn of the event loop later).

        Waits are bounded: while the server is away or hung the call fails at once (503); at
        most :data:`MAX_QUEUED` events wait for a transaction (more: 503 ``database busy``; a larger
        call alone waits when nothing else does); and
        a call waiting when the server is found hung is answered 503 at once (its events may
        still be committed when the server resumes: at-least-once, a retry is a duplicate)."""
        self._db.check()
        # A call larger than the bound alone is let in when nothing waits: refused, it would be
        # refused again on every retry (503 with Retry-After), and its events are in memory
        # already (the request's size limits bound them).
        if self._queued and self._queued + len(items) > MAX_QUEUED:
            raise StorageUnavailable(
                "database busy", f"{self._queued} events wait for the database", retry_after=1.0
            )
        bodies = [_body(item.event) for item in items]  # a bad event fails this call alone
        call = _Call(items, bodies, version, asyncio.get_running_loop().create_future(), durable)
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
        # The group is taken when its task starts, in the event loop's next round, not now:
        # the calls that arrive in the rest of this round (the other connections' requests the
        # loop is reading) join it instead of waiting for a transaction of their own. One task
        # at a time waits to start; it counts as a transaction.
        #
        # A second transaction beside one being written only once that one is long (written
        # for SECOND_AFTER, or holding SECOND_AT events or more): until then the calls wait and
        # go into the next group together, which costs the server and this process less per
        # event than two smaller groups (each transaction costs the server about as much as a
        # dozen events, and its statement and answer this process about as much again), and
        # answers them sooner than two transactions whose flushes wait for each other.
        if not self._waiting or self._forming or self._groups >= MAX_GROUPS:
            return
        loop = asyncio.get_running_loop()
        if self._long_at:
            long_at = min(self._long_at.values())
            if long_at > loop.time():
                if self._second is None:
                    self._second = loop.call_at(long_at, self._second_due)
                return
        self._cancel_second()
        self._groups += 1
        self._forming = True
        asyncio.create_task(self._commit())

    def _cancel_second(self) -> None:
        if self._second is not None:
            self._second.cancel()
            self._second = None

    def _second_due(self) -> None:
        self._second = None
        self._start_group()

    async def _commit(self) -> None:
        self._forming = False
        token = object()
        loop = asyncio.get_running_loop()
        try:
            while True:
                calls = list(self._waiting)
                self._waiting.clear()
                self._queued = 0
                self._cancel_second()  # nothing waits for it now
                if calls:  # none: their callers were answered meanwhile (``_unqueue``)
                    events = sum(len(call.items) for call in calls)
                    self._long_at[token] = loop.time() + (0.0 if events >= SECOND_AT else SECOND_AFTER)
                    await self._group(calls)
                # The calls that waited while this transaction was written go into the next one
                # at once, from this task: a task of their own would start a turn of the event
                # loop later, and they have waited already.
                if not self._waiting or self._forming:
                    return
        finally:
            self._long_at.pop(token, None)
            self._groups -= 1
            self._start_group()

    async def _group(self, calls: list[_Call]) -> None:
        """Write ``calls`` in one transaction and answer each caller."""
        try:
            await self._write(calls)
        except BaseException as exc:  # the transaction did not commit: nobody's events are in
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for call in calls:
            if call.future.done():
                continue  # the caller was cancelled meanwhile
            if call.error is not None:
                call.future.set_exception(call.error)
                continue
            if call.durable is not None:
                try:
                    call.durable(call.result)
                except Exception:  # the caller's; the other calls of the group go on
                    log.exception("an append's durable callback failed")
            call.future.set_result(call.result)

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
        keys: set[tuple[str, str, str]] = set()
        d_items: list[int] = []
        d_subs: list[str] = []
        d_groups: list[str | None] = []
        for call in calls:
            for item, body in zip(call.items, call.bodies, strict=True):
                versions.append(call.version)
                tenants.append(item.tenant)
                sources.append(item.source)
                ids.append(item.id)
                keys.add((item.tenant, item.source, item.id))
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
        grouped = any(group is not None for group in d_groups)
        # The arrays travel in binary (%b): psycopg writes a text-format array in Python,
        # escaping every quote of every event body with a regular expression; that cost more
        # than the rest of an event's ingest together (about 110 µs for 8 events).
        # The arguments both statements start with: the call's time and horizon, the events,
        # their trace contexts (no array at all when nothing is traced) and the deliveries.
        common = (
            now,
            now - self.dedup_window,
            versions,
            tenants,
            sources,
            ids,
            bodies,
            traces if traced else None,
            d_items,
            d_subs,
        )
        kept = self.retention > 0  # every event kept for the retention, matched or not
        if not grouped and len(keys) == len(sources):
            # No ordering group, no key twice: the statement with fewer parts (step 9).
            rows = await self._db.call(
                "SELECT * FROM cebroker_append_distinct(%s, %s, %b::bigint[], %b::text[], %b::text[],"
                " %b::text[], %b::text[], %b::text[], %b::int[], %b::text[], %s, %s)",
                (*common, kept, BOUNDARY),
            )
        else:
            # The ordering groups are None when no delivery has one: the function then takes
            # no group locks (a call and a statement of the server's for each append otherwise).
            rows = await self._db.call(
                "SELECT * FROM cebroker_append(%s, %s, %b::bigint[], %b::text[], %b::text[], %b::text[],"
                " %b::text[], %b::text[], %b::int[], %b::text[], %b::text[], %s, %s, %s)",
                (*common, d_groups if grouped else None, kept, HELD_AT, BOUNDARY),
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

    async def _send_announcement(self, subscriptions: set[str]) -> None:
        if subscriptions:
            try:
                await self._db.call(ANNOUNCE, (DUE, sorted(subscriptions), self._clock.now()))
            except StorageUnavailable as exc:
                log.debug("announcing deliveries failed: %s", exc)

    async def announce_now(self) -> None:
        """Send at once the announcement that waits for :data:`ANNOUNCE_AFTER` (when the
        storage closes: the other instances would otherwise hear of the deliveries this one
        leaves unclaimed only at their next rescan). Best effort, as the announcement is."""
        announcer = self._announcer
        if announcer is not None:
            announcer.cancel()
            await asyncio.wait([announcer])  # its own end, whatever it was; never this task's
        subscriptions, self._announced = self._announced, set()
        await self._send_announcement(subscriptions)

    async def _announce_all(self) -> None:
        try:
            while self._announced:
                await asyncio.sleep(ANNOUNCE_AFTER)
                subscriptions, self._announced = self._announced, set()
                # Not those whose token bucket this instance left empty: nobody can claim them
                # before it refills, and this instance's loader claims them then.
                now = self._clock.now()
                await self._send_announcement({s for s in subscriptions if self.refills_at(s, now) is None})
        finally:
            self._announcer = None
