"""Vacuuming the delivery table as it drains.

The table of deliveries is a queue: rows are appended at one end and, delivered, deleted at the
other. A deleted row's index entries stay until the table is vacuumed, and every claim walks
the due index from the head of its subscription's rows, over the entries of every delivery
completed since the last vacuum: 1.3 ms a claim with 290,000 such entries against 0.16 ms after
a vacuum (docs/performance.md, PostgreSQL, instances). Autovacuum looks at a table at most once
a ``autovacuum_naptime`` (one minute by default), during which a broker completes hundreds of
thousands of deliveries.

So every instance looks at the table's dead rows every :data:`CHECK_EVERY` seconds and
vacuums it when they are at least :data:`MIN_DEAD` and :data:`SCALE` times its live rows (as
autovacuum's scale factor: the cost of a vacuum grows with the table, so it is spread over as
many completions). ``SKIP_LOCKED``: when another instance, or autovacuum, is vacuuming the
table, this one does not wait. A vacuum that fails (a timeout on a very large table, the
server away) is left to autovacuum for :data:`AFTER_FAILURE` seconds.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.postgres.background import Background
from cebroker.storage.postgres.database import Database

log = logging.getLogger(__name__)

#: Seconds between two looks at the delivery table's dead rows.
CHECK_EVERY = 1.0
#: Dead rows below which the table is left to autovacuum...
MIN_DEAD = 10_000
#: ...and the share of its live rows the dead ones must reach too.
SCALE = 0.2
#: Seconds without a vacuum of this instance after one failed.
AFTER_FAILURE = 60.0

STATS = "SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relid = 'pipeline_deliveries'::regclass"
VACUUM = "VACUUM (SKIP_LOCKED) pipeline_deliveries"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When the table is vacuumed: ``min_dead`` dead rows and ``scale`` times the live ones."""

    min_dead: int = MIN_DEAD
    scale: float = SCALE

    def due(self, live: int, dead: int) -> bool:
        """Whether a table with ``live`` and ``dead`` rows is to be vacuumed now."""
        return dead >= max(self.min_dead, self.scale * live)


class Vacuum:
    """The look-and-vacuum loop of one instance (see the module docstring)."""

    def __init__(self, db: Database, thresholds: Thresholds = Thresholds()) -> None:
        self._db = db
        self.thresholds = thresholds
        self._loop = Background("cebroker-postgres-vacuum", self._run)

    async def vacuum_if_due(self) -> bool:
        """Look at the table's dead rows once and vacuum it if they are due; whether it did."""
        async with self._db.connection() as conn:  # a read: no success reported
            cur = await conn.execute(STATS)
            row = await cur.fetchone()
        if row is None or not self.thresholds.due(int(row[0]), int(row[1])):
            return False
        # on a connection of its own, which a long vacuum does not take from the pool; its
        # failure is not the broker's (the table is left to autovacuum)
        async with self._db.maintenance() as conn:
            await conn.execute(VACUUM)
        return True

    def start(self) -> None:
        """Start looking, in the background."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop looking (a vacuum under way is cancelled with the task)."""
        await self._loop.stop()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_EVERY)
            try:
                await self.vacuum_if_due()
            except StorageUnavailable as exc:
                log.debug("vacuuming the delivery table failed: %s", exc)
                await asyncio.sleep(AFTER_FAILURE)
            except Exception:
                # not the database's fault but this process's: the loop must outlive it, the
                # claims would slow down as the table fills with dead rows
                log.exception("vacuuming the delivery table failed; trying again later")
                await asyncio.sleep(AFTER_FAILURE)
