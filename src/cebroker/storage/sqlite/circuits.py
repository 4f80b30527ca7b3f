"""Open circuits on the broker's SQLite file (table ``pipeline_circuits``, one row per open
circuit). Each call is one small statement or two on the writer, in order with the
dispatcher's other writes; none is ``durable`` (see :mod:`cebroker.storage.circuits`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from cebroker.storage.circuits import Circuit
from cebroker.storage.sqlite.database import Database

_COLUMNS = "subscription, opened_at, next_probe_at, failed_probes, last_error, probe_until"


def _circuit(row: Any) -> Circuit:
    return Circuit(row[0], row[1], row[2], row[3], row[4], row[5])


def _stored(conn: sqlite3.Connection, subscription: str) -> Circuit | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM pipeline_circuits WHERE subscription = ?", (subscription,)
    ).fetchone()
    return None if row is None else _circuit(row)


class SqliteCircuitStore:
    """:class:`~cebroker.storage.circuits.CircuitStore` on a :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def circuits(self) -> dict[str, Circuit]:
        """Every open circuit."""

        def job(conn: sqlite3.Connection) -> dict[str, Circuit]:
            return {
                row[0]: _circuit(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM pipeline_circuits")
            }

        return await self._db.read(job)

    async def open(self, subscription: str, *, at: float, next_probe_at: float, error: str) -> Circuit:
        """Open the circuit unless it is open already; the stored circuit."""

        def job(conn: sqlite3.Connection) -> Circuit:
            conn.execute(
                f"INSERT INTO pipeline_circuits ({_COLUMNS}) VALUES (?, ?, ?, 0, ?, NULL) "
                "ON CONFLICT (subscription) DO NOTHING",
                (subscription, at, next_probe_at, error),
            )
            stored = _stored(conn, subscription)
            if stored is None:
                raise RuntimeError("the circuit just written is missing")
            return stored

        return await self._db.write(job, durable=False)

    async def claim_probe(
        self, subscription: str, *, now: float, until: float
    ) -> tuple[Circuit | None, bool]:
        """The right to send the one probe, when it is due and no other probe holds it."""

        def job(conn: sqlite3.Connection) -> tuple[Circuit | None, bool]:
            claimed = conn.execute(
                "UPDATE pipeline_circuits SET probe_until = ? WHERE subscription = ? AND next_probe_at <= ? "
                "AND (probe_until IS NULL OR probe_until <= ?)",
                (until, subscription, now, now),
            ).rowcount
            return _stored(conn, subscription), claimed == 1

        return await self._db.write(job, durable=False)

    async def probe_failed(self, subscription: str, *, next_probe_at: float, error: str) -> Circuit | None:
        """One more failed probe, the new last error and next probe time; the lease released."""

        def job(conn: sqlite3.Connection) -> Circuit | None:
            conn.execute(
                "UPDATE pipeline_circuits SET failed_probes = failed_probes + 1, last_error = ?, "
                "next_probe_at = ?, probe_until = NULL WHERE subscription = ?",
                (error, next_probe_at, subscription),
            )
            return _stored(conn, subscription)

        return await self._db.write(job, durable=False)

    async def close(self, subscription: str) -> bool:
        """Close the circuit; whether it was open."""

        def job(conn: sqlite3.Connection) -> bool:
            cur = conn.execute("DELETE FROM pipeline_circuits WHERE subscription = ?", (subscription,))
            return cur.rowcount == 1

        return await self._db.write(job, durable=False)
