"""Ordering groups on PostgreSQL (see :mod:`cebroker.storage.deliveries`), for every instance.

A group has at most one delivery that can be due: its lowest id. Two things keep that true
when several instances write at once, both under a transaction-level advisory lock per group
(taken in key order, so two transactions never wait for each other in a cycle):

* a new delivery is held if its group has any delivery in the log, and its id is drawn from the
  sequence only once the lock is taken, so a group's ids grow in the order its deliveries were
  written;
* a transaction that removed deliveries releases the lowest id of each of their groups (if it
  was held) under the same lock, so it sees every delivery written before, and a delivery
  written after sees the removal.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from cebroker.storage.deliveries import HELD_AT
from cebroker.storage.postgres.database import AsyncConn

#: The shared advisory lock key space of ordering groups starts from this (any constant).
_LOCK_NAMESPACE = b"cebroker ordering group\x00"

_BUSY = (
    "SELECT g.sub, g.grp FROM unnest(%s::text[], %s::text[]) AS g (sub, grp) WHERE EXISTS"
    " (SELECT 1 FROM pipeline_deliveries d WHERE d.subscription = g.sub AND d.orderkey = g.grp)"
)
_RELEASE = (
    "UPDATE pipeline_deliveries d SET next_at = %s FROM (SELECT (SELECT min(x.id) FROM pipeline_deliveries x"
    " WHERE x.subscription = g.sub AND x.orderkey = g.grp) AS id FROM unnest(%s::text[], %s::text[])"
    " AS g (sub, grp)) AS h WHERE d.id = h.id AND d.next_at = %s RETURNING d.subscription"
)

Group = tuple[str, str | None]


def lock_key(subscription: str, group: str) -> int:
    """The advisory lock key of a group: 64 bits of a hash of the subscription and the group."""
    digest = hashlib.blake2b(_LOCK_NAMESPACE + f"{subscription}\x00{group}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _groups(groups: Iterable[Group]) -> list[tuple[str, str]]:
    return sorted({(sub, group) for sub, group in groups if group is not None})


async def lock(conn: AsyncConn, groups: Iterable[Group]) -> None:
    """Take the advisory lock of every group (until the transaction ends), in key order."""
    keys = sorted({lock_key(sub, group) for sub, group in _groups(groups)})
    if keys:
        # unnest yields the array in order, so the locks are taken in key order
        await conn.execute("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(%s::bigint[]) AS k", (keys,))


async def busy(conn: AsyncConn, groups: Iterable[Group]) -> set[tuple[str, str]]:
    """Those of ``groups`` that have a delivery in the log (call with their locks held)."""
    wanted = _groups(groups)
    if not wanted:
        return set()
    cur = await conn.execute(_BUSY, ([s for s, _ in wanted], [g for _, g in wanted]))
    return {(str(s), str(g)) for s, g in await cur.fetchall()}


async def release(conn: AsyncConn, groups: Iterable[Group], now: float) -> set[str]:
    """Deliveries of these groups left the log: lock them and release the next of each;
    returns the subscriptions that got a delivery due."""
    wanted = _groups(groups)
    if not wanted:
        return set()
    await lock(conn, wanted)
    cur = await conn.execute(_RELEASE, (now, [s for s, _ in wanted], [g for _, g in wanted], HELD_AT))
    return {str(r[0]) for r in await cur.fetchall()}
