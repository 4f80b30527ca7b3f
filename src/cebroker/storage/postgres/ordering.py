"""Ordering groups on PostgreSQL (see :mod:`cebroker.storage.deliveries`), for every instance.

A group has at most one delivery that can be due: its lowest id. Two things keep that true
when several instances write at once, both under a transaction-level advisory lock per group
(taken in key order, so two transactions never wait for each other in a cycle, by the server
function ``cebroker_lock_groups``, which the one-statement append and completion call too):

* a new delivery is held if its group has any delivery in the log, and its id is drawn from the
  sequence only once the lock is taken, so a group's ids grow in the order its deliveries were
  written;
* a transaction that removed deliveries releases the lowest id of each of their groups (if it
  was held) under the same lock, so it sees every delivery written before, and a delivery
  written after sees the removal.
"""

from __future__ import annotations

from collections.abc import Iterable

from cebroker.storage.deliveries import HELD_AT
from cebroker.storage.postgres.database import AsyncConn

_BUSY = (
    "SELECT g.sub, g.grp FROM unnest(%b::text[], %b::text[]) AS g (sub, grp) WHERE EXISTS"
    " (SELECT 1 FROM pipeline_deliveries d WHERE d.subscription = g.sub AND d.orderkey = g.grp)"
)

Group = tuple[str, str | None]


def _groups(groups: Iterable[Group]) -> list[tuple[str, str]]:
    return sorted({(sub, group) for sub, group in groups if group is not None})


async def lock(conn: AsyncConn, groups: Iterable[Group]) -> None:
    """Take the advisory lock of every group (until the transaction ends), in key order."""
    wanted = _groups(groups)
    if wanted:
        await conn.execute(
            "SELECT cebroker_lock_groups(%b::text[], %b::text[])",
            ([s for s, _ in wanted], [g for _, g in wanted]),
        )


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
    cur = await conn.execute(
        "SELECT cebroker_release_groups(%b::text[], %b::text[], %s, %s)",
        ([s for s, _ in wanted], [g for _, g in wanted], now, HELD_AT),
    )
    return {str(r[0]) for r in await cur.fetchall()}
