"""The PostgreSQL schema: the steps in ``sql/<component>/`` (tables, indexes, triggers and the
server functions of the hot paths: append, claims, completion, ordering groups, buckets) run
by the shared runner (:mod:`cebroker.storage.migrations`).

The components are those of the SQLite backend, and so are their versions, except that
PostgreSQL's ``deliveries`` has six more steps (6 to 9 and 11, which only replace or add
server functions, and 10, which counts freed claims apart from the claims row).
Each step runs in a transaction that first takes a transaction-level advisory lock, so
several instances starting at once on a fresh database apply each step exactly once: the
others wait, then find nothing left to do. A step's file is sent whole, as one statement string.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from cebroker.storage import migrations
from cebroker.storage.migrations import Step

#: The advisory lock key of schema migrations (any constant the broker alone uses).
MIGRATION_LOCK = 0x63656272_6F6B6572 & 0x7FFF_FFFF_FFFF_FFFF

#: component -> its steps, oldest first (version n = after step n).
STEPS = migrations.load_steps(__package__ or "cebroker.storage.postgres")
#: component -> the scripts of its steps, oldest first.
MIGRATIONS: dict[str, tuple[str, ...]] = {c: tuple(s.text for s in steps) for c, steps in STEPS.items()}


def latest() -> dict[str, int]:
    """The version of each component this code writes."""
    return migrations.latest(STEPS)


class _Target:
    """:class:`~cebroker.storage.migrations.SchemaTarget` over an autocommit connection."""

    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._conn = conn

    @contextmanager
    def step(self) -> Iterator[None]:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            yield

    def versions(self) -> dict[str, int]:
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions (component text PRIMARY KEY, version int NOT NULL)"
        )
        rows = self._conn.execute("SELECT component, version FROM schema_versions").fetchall()
        return {str(component): int(str(version)) for component, version in rows}

    def apply(self, step: Step) -> None:
        # The file's bytes as they are: one statement string, which the server parses itself.
        self._conn.execute(step.script)

    def record(self, component: str, version: int) -> None:
        self._conn.execute(
            "INSERT INTO schema_versions (component, version) VALUES (%s, %s)"
            " ON CONFLICT (component) DO UPDATE SET version = excluded.version",
            (component, version),
        )


def migrate(conn: psycopg.Connection[tuple[Any, ...]], name: str) -> list[str]:
    """Bring every component's schema up to date, one transaction per step under the migration
    lock; returns the steps applied (``component vN``), none when another instance did them.

    Raises:
        SchemaTooNew: the database was written by a newer release; nothing was changed.
    """
    return migrations.migrate(_Target(conn), STEPS, name)
