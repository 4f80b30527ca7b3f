"""Broker instances on one database: heartbeats, leases and the take-over of a dead one's claims.

Each instance has a row in ``broker_instances`` whose ``heartbeat`` (the server's clock) it
renews every quarter of the lease. Every instance also reaps, at least every quarter of the
lease and just after the oldest heartbeat of the others turns older than the lease: an instance
whose heartbeat is older than the lease is deleted and the deliveries it had claimed are freed
for the others, who hear of them through ``NOTIFY cebroker_due`` at once. An instance that has
not renewed its own heartbeat within three quarters of the lease (measured from when the
renewal was *sent*, so the server's view is never older) stops starting attempts of what it
claimed (``live`` is false): by the time the others may take its claims over it no longer
touches them.

An instance that lost its claims (declared dead while cut off) or may hold claims it no longer
knows of (a claim whose answer was lost with the connection) takes a new id: its old claims
are freed and deliveries handed out under the old id are no longer ``held``. Before it frees
them it records what it delivered while the database was away (:meth:`Membership.before_leave`:
the delivery log's unrecorded completions), so that those are not sent again.

A claim is made only while its owner's row exists, and locks that row until it commits
(``cebroker_claim_many``, deliveries step 7); removing a row (a new id, a reaping) deletes it
before freeing its claims. So a claim sent under an id just before the id was given up is
either refused or freed with the rest: no delivery keeps an owner that no instance frees.

After the database was away *for this instance* (a heartbeat or a reaping failed), it reaps
nobody until it has been back for a whole lease: every heartbeat went stale during the outage,
and the other instances need that long to renew theirs and record what they delivered meanwhile.
Otherwise the first instance back would take over every other instance's claims at once and
send again what they had delivered but not yet recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.postgres.database import AsyncConn, Database
from cebroker.storage.postgres.listener import DUE

log = logging.getLogger("cebroker.storage")

#: Of the lease: how often the heartbeat is renewed, and how long claims are used after one.
RENEW_FRACTION = 0.25
HOLD_FRACTION = 0.75
#: Seconds after another instance's lease expires at which the reaper looks (the server's clock
#: and this one's may differ a little), and the shortest pause between two looks.
REAP_MARGIN = 0.02
REAP_SOONEST = 0.05
#: Seconds between purges of old subscription changes, and how long those are kept.
PURGE_EVERY = 60.0
CHANGES_KEPT = "1 hour"
#: While stopping, how long to wait for a cancelled loop before cancelling it again.
STOP_RECHECK = 0.5
#: A NOTIFY payload must stay under 8000 bytes; a longer list becomes "*" (look at all).
MAX_PAYLOAD = 7000


def due_payload(subscriptions: set[str]) -> str:
    """The ``cebroker_due`` payload naming ``subscriptions``."""
    text = " ".join(sorted(subscriptions))
    return text if len(text) <= MAX_PAYLOAD else "*"


async def notify_due(conn: AsyncConn, subscriptions: set[str]) -> None:
    """Tell every instance, at commit, that deliveries of ``subscriptions`` wait unclaimed."""
    if subscriptions:
        await conn.execute("SELECT pg_notify(%s, %s)", (DUE, due_payload(subscriptions)))


class Membership:
    """This instance's row, its heartbeat and the reaping of dead instances."""

    def __init__(self, db: Database, lease: float) -> None:
        self._db = db
        self.lease = lease
        #: The current id (the owner of new claims), None until registered.
        self.id: str | None = None
        self._renewed_at = -float("inf")
        self._suspect = False
        self._tasks: list[asyncio.Task[None]] = []
        self._lost: list[Callable[[], None]] = []
        self._leaving: list[Callable[[AsyncConn], Awaitable[None]]] = []
        #: Monotonic time before which this instance reaps nobody (see the module docstring).
        self._reap_after = 0.0
        self._cut_off = False
        self._last_purge = 0.0
        #: Live instances on the database, this one included, as of the last reaping.
        self.instances = 1

    def on_lost(self, handler: Callable[[], None]) -> None:
        """Call ``handler`` when this instance took a new id (its old claims were freed)."""
        self._lost.append(handler)

    def before_leave(self, handler: Callable[[AsyncConn], Awaitable[None]]) -> None:
        """Run ``handler`` in the transaction that frees this instance's claims under an old id,
        before they are freed."""
        self._leaving.append(handler)

    def _answered(self, ok: bool) -> None:
        """A heartbeat or reaping succeeded (``ok``) or failed: after a failure, reaping waits
        until the database has been back for a lease."""
        if not ok:
            self._cut_off = True
            self._reap_after = math.inf  # until it has been back for a lease
        elif self._cut_off:
            self._cut_off = False
            self._reap_after = time.monotonic() + self.lease

    @property
    def live(self) -> bool:
        """Whether claims made under :attr:`id` may be used (see the module docstring)."""
        return self.id is not None and time.monotonic() - self._renewed_at < self.lease * HOLD_FRACTION

    def suspect(self) -> None:
        """A claim's outcome is unknown (the connection was lost): take a new id at the next
        renewal, so that no claim of this instance stays unused."""
        self._suspect = True

    async def start(self) -> None:
        """Register (or keep trying in the background), start the heartbeat and the reaper."""
        with contextlib.suppress(StorageUnavailable):
            await self._beat()
        self._tasks = [
            asyncio.create_task(self._run(), name="cebroker-postgres-heartbeat"),
            asyncio.create_task(self._reaper(), name="cebroker-postgres-reaper"),
        ]

    async def stop_heartbeat(self) -> None:
        """Stop renewing and reaping (what a killed process does): the claims stay until the
        lease expires."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            # Cancelled again until it ends: a cancellation that arrives inside a statement can
            # be answered by the driver without reaching the loop, which would then run on.
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=STOP_RECHECK)
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop(self) -> None:
        """Stop the heartbeat, free this instance's claims and remove its row."""
        await self.stop_heartbeat()
        old, self.id = self.id, None
        if old is not None:
            with contextlib.suppress(StorageUnavailable):
                await self._db.run(lambda conn: self._leave(conn, old), durable=False)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.lease * RENEW_FRACTION)
            try:
                await self._beat()
            except StorageUnavailable as exc:
                self._answered(False)
                log.debug("heartbeat failed: %s", exc)
            except Exception:
                # Anything else is a fault of this process, not of the database; the loop must
                # outlive it all the same: without heartbeats this instance's claims go unused
                # until it restarts.
                self._answered(False)
                log.exception("heartbeat failed; trying again")
            else:
                self._answered(True)

    async def _reaper(self) -> None:
        """Reap at least every quarter of the lease, and when the oldest heartbeat of another
        instance will be older than the lease, just after: a dead instance's claims are taken
        over as its lease expires, not up to a quarter of a lease later."""
        while True:
            wait = self.lease * RENEW_FRACTION
            try:
                expires_in = await self._reap()
            except StorageUnavailable as exc:
                self._answered(False)
                log.debug("reaping failed: %s", exc)
            except Exception:  # as in _run: a dead reaper would leave dead instances' claims
                self._answered(False)
                log.exception("reaping failed; trying again")
            else:
                self._answered(True)
                holding = self._reap_after - time.monotonic()
                if expires_in is not None and holding > 0:  # not before the grace ends
                    expires_in = max(expires_in, holding)
                if expires_in is not None:
                    wait = min(wait, max(REAP_SOONEST, expires_in + REAP_MARGIN))
            await asyncio.sleep(wait)

    async def _beat(self) -> None:
        sent = time.monotonic()
        current = self.id
        fresh = (
            current is not None and not self._suspect and sent - self._renewed_at < self.lease * HOLD_FRACTION
        )
        if fresh and current is not None:

            async def renew(conn: AsyncConn) -> int:
                cur = await conn.execute(
                    "UPDATE broker_instances SET heartbeat = clock_timestamp() WHERE id = %s", (current,)
                )
                return cur.rowcount

            if await self._db.run(renew, durable=False) == 1:
                self._renewed_at = sent
                return
        # First registration, or the old id cannot be trusted: free its claims, take a new one.
        new = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"

        async def rejoin(conn: AsyncConn) -> None:
            if current is not None:
                await self._leave(conn, current, self._leaving)
            await conn.execute(
                "INSERT INTO broker_instances (id, host, pid, heartbeat)"
                " VALUES (%s, %s, %s, clock_timestamp())",
                (new, socket.gethostname(), os.getpid()),
            )

        self._suspect = False
        await self._db.run(rejoin, durable=False)
        self.id, self._renewed_at = new, sent
        if current is not None:
            log.info("this instance took a new id after losing its lease; its claims were freed")
            for handler in self._lost:
                handler()

    @staticmethod
    async def _leave(
        conn: AsyncConn, instance: str, before: Sequence[Callable[[AsyncConn], Awaitable[None]]] = ()
    ) -> None:
        """Remove ``instance``'s row and free its claims, after the ``before`` handlers."""
        # The row first: its removal waits for the claims under way with this id (they lock
        # it), and the statements after it see them committed, so the last one frees them too.
        # First also in the lock order: a claim locks the row before any claims row, and the
        # handlers' completions lock claims rows.
        await conn.execute("DELETE FROM broker_instances WHERE id = %s", (instance,))
        for handler in before:
            await handler(conn)
        cur = await conn.execute(
            "UPDATE pipeline_deliveries SET owner = NULL WHERE owner = %s RETURNING subscription", (instance,)
        )
        await notify_due(conn, {str(r[0]) for r in await cur.fetchall()})

    async def _reap(self) -> float | None:
        """Free the claims of instances whose heartbeat is older than the lease; returns the
        seconds until the next lease of another instance expires (None: there is none)."""
        lease = self.lease
        me = self.id
        purge = time.monotonic() - self._last_purge > PURGE_EVERY
        may_reap = time.monotonic() >= self._reap_after

        async def reap(conn: AsyncConn) -> tuple[int, float | None]:
            dead: list[str] = []
            if may_reap:
                cur = await conn.execute(
                    "DELETE FROM broker_instances"
                    " WHERE heartbeat < clock_timestamp() - make_interval(secs => %s) RETURNING id",
                    (lease,),
                )
                dead = [str(r[0]) for r in await cur.fetchall()]
            freed: set[str] = set()
            # After the rows' removal, as in _leave: claims under way with their ids are freed too.
            if dead:  # no index on owner (claims stay HOT updates): this scan is a take-over's cost
                cur = await conn.execute(
                    "UPDATE pipeline_deliveries SET owner = NULL WHERE owner = ANY(%b::text[])"
                    " RETURNING subscription",
                    (dead,),
                )
                freed = {str(r[0]) for r in await cur.fetchall()}
                await notify_due(conn, freed)
            cur = await conn.execute(
                "SELECT extract(epoch FROM min(heartbeat) FILTER (WHERE id IS DISTINCT FROM %s)"
                " + make_interval(secs => %s) - clock_timestamp()), count(*) FROM broker_instances",
                (me, lease),
            )
            row = await cur.fetchone()
            self.instances = max(1, int(row[1])) if row else 1
            if purge:
                await conn.execute(
                    "DELETE FROM subscription_changes WHERE at < now() - %s::interval", (CHANGES_KEPT,)
                )
            return len(freed), (float(row[0]) if row and row[0] is not None else None)

        freed, expires_in = await self._db.run(reap, durable=False)
        if freed:
            log.info("took over the deliveries claimed by instances whose lease expired")
        if purge:
            self._last_purge = time.monotonic()
        return expires_in
