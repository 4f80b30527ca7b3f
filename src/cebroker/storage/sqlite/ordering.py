"""Ordering groups in the SQLite log (see :mod:`cebroker.storage.deliveries`).

A new delivery of a group that already has one in the log is written held (due at
:data:`~cebroker.storage.deliveries.HELD_AT`); after deliveries leave the log, the lowest id of
each of their groups is released (due now) if it was held. So a group has at most one delivery
that can be due, its oldest. One writer thread does all of this, so nothing can come between
the check and the write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

import orjson

from cebroker.storage.deliveries import HELD_AT

#: The ``[subscription, group]`` pairs of the JSON array that have a delivery in the log.
_BUSY = (
    "SELECT value->>0, value->>1 FROM json_each(?) WHERE EXISTS (SELECT 1 FROM pipeline_deliveries d "
    "WHERE d.subscription = value->>0 AND d.orderkey = value->>1)"
)
_RELEASE = (
    "UPDATE pipeline_deliveries SET next_at = ?1 WHERE id = (SELECT MIN(id) FROM pipeline_deliveries "
    "WHERE subscription = ?2 AND orderkey = ?3) AND next_at = ?4"
)


def held(conn: sqlite3.Connection, rows: Sequence[tuple[str, str | None]]) -> list[bool]:
    """For new deliveries ``(subscription, group)``, in the order they are written: whether each
    waits behind an earlier one of its group (in the log already, or earlier in ``rows``)."""
    groups = {(sub, group) for sub, group in rows if group is not None}
    if not groups:
        return [False] * len(rows)
    busy = {(str(s), str(g)) for s, g in conn.execute(_BUSY, (orjson.dumps(sorted(groups)),))}
    out: list[bool] = []
    for sub, group in rows:
        if group is None:
            out.append(False)
            continue
        out.append((sub, group) in busy)
        busy.add((sub, group))
    return out


def release(conn: sqlite3.Connection, groups: Iterable[tuple[str, str | None]], now: float) -> None:
    """Deliveries of these ``(subscription, group)`` left the log: the next of each may go."""
    wanted = sorted({(sub, group) for sub, group in groups if group is not None})
    if wanted:
        conn.executemany(_RELEASE, [(now, sub, group, HELD_AT) for sub, group in wanted])
