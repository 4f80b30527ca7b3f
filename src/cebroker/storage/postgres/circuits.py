"""Open circuits on PostgreSQL (table ``pipeline_circuits``, one row per open circuit), shared by
every broker instance on the database. Each call is one statement (two for a read-back), so two
instances racing for a transition see one winner: ``INSERT ... ON CONFLICT DO NOTHING`` opens a
circuit once, and a conditional ``UPDATE`` grants one probe lease at a time.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from cebroker.storage.circuits import Circuit
from cebroker.storage.postgres.database import AsyncConn, Database

_COLUMNS = sql.SQL(", ").join(
    map(
        sql.Identifier,
        ("subscription", "opened_at", "next_probe_at", "failed_probes", "last_error", "probe_until"),
    )
)


def _circuit(row: Any) -> Circuit:
    until = None if row[5] is None else float(row[5])
    return Circuit(str(row[0]), float(row[1]), float(row[2]), int(row[3]), str(row[4]), until)


async def _stored(conn: AsyncConn, subscription: str) -> Circuit | None:
    cur = await conn.execute(
        sql.SQL("SELECT {} FROM pipeline_circuits WHERE subscription = %s").format(_COLUMNS), (subscription,)
    )
    row = await cur.fetchone()
    return None if row is None else _circuit(row)


class PostgresCircuitStore:
    """:class:`~cebroker.storage.circuits.CircuitStore` on a PostgreSQL :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def circuits(self) -> dict[str, Circuit]:
        """Every open circuit."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql.SQL("SELECT {} FROM pipeline_circuits").format(_COLUMNS))
            return await cur.fetchall()

        return {str(row[0]): _circuit(row) for row in await self._db.run(job, write=False)}

    async def open(self, subscription: str, *, at: float, next_probe_at: float, error: str) -> Circuit:
        """Open the circuit unless it is open already; the stored circuit."""

        async def job(conn: AsyncConn) -> Circuit:
            await conn.execute(
                sql.SQL(
                    "INSERT INTO pipeline_circuits ({}) VALUES (%s, %s, %s, 0, %s, NULL)"
                    " ON CONFLICT (subscription) DO NOTHING"
                ).format(_COLUMNS),
                (subscription, at, next_probe_at, error),
            )
            stored = await _stored(conn, subscription)
            if stored is None:
                raise RuntimeError("the circuit just written is missing")
            return stored

        return await self._db.run(job, durable=False)

    async def claim_probe(
        self, subscription: str, *, now: float, until: float
    ) -> tuple[Circuit | None, bool]:
        """The right to send the one probe, when it is due and no other probe holds it."""

        async def job(conn: AsyncConn) -> tuple[Circuit | None, bool]:
            cur = await conn.execute(
                "UPDATE pipeline_circuits SET probe_until = %s WHERE subscription = %s"
                " AND next_probe_at <= %s AND (probe_until IS NULL OR probe_until <= %s)",
                (until, subscription, now, now),
            )
            granted = cur.rowcount == 1
            return await _stored(conn, subscription), granted

        return await self._db.run(job, durable=False)

    async def probe_failed(self, subscription: str, *, next_probe_at: float, error: str) -> Circuit | None:
        """One more failed probe, the new last error and next probe time; the lease released."""

        async def job(conn: AsyncConn) -> Circuit | None:
            cur = await conn.execute(
                sql.SQL(
                    "UPDATE pipeline_circuits SET failed_probes = failed_probes + 1, last_error = %s,"
                    " next_probe_at = %s, probe_until = NULL WHERE subscription = %s RETURNING {}"
                ).format(_COLUMNS),
                (error, next_probe_at, subscription),
            )
            row = await cur.fetchone()
            return None if row is None else _circuit(row)

        return await self._db.run(job, durable=False)

    async def close(self, subscription: str) -> bool:
        """Close the circuit; whether it was open."""

        async def job(conn: AsyncConn) -> bool:
            cur = await conn.execute("DELETE FROM pipeline_circuits WHERE subscription = %s", (subscription,))
            return cur.rowcount == 1

        return await self._db.run(job, durable=False)
