"""The SQLite schema: the steps in ``sql/<component>/`` run by the shared runner
(:mod:`cebroker.storage.migrations`).

Version 1 of each component is the schema of the releases that had no version row for it (only
the subscription store kept one), written with ``IF NOT EXISTS``, so such a file opens without
loss. A file that records a version newer than this code, or a component it does not know, was
written by a newer release and is refused before anything changes. The file is held by one
process (``lock.py``), so a step's transaction needs no lock of its own beyond ``BEGIN
IMMEDIATE``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cebroker.storage import migrations
from cebroker.storage.migrations import Step

#: component -> its steps, oldest first (version n = after step n).
STEPS = migrations.load_steps(__package__ or "cebroker.storage.sqlite")
#: component -> the scripts of its steps, oldest first.
MIGRATIONS: dict[str, tuple[str, ...]] = {c: tuple(s.text for s in steps) for c, steps in STEPS.items()}


def latest() -> dict[str, int]:
    """The version of each component this code writes."""
    return migrations.latest(STEPS)


def statements(script: str) -> Iterator[str]:
    """The statements of a script, delimited by SQLite's own tokenizer
    (:func:`sqlite3.complete_statement`), not by splitting on ``;``: a ``;`` inside a string, a
    comment or a trigger's body ends nothing. Text after the last statement that holds no
    statement (comments, blanks) is dropped; an unfinished statement is yielded as it is, for
    SQLite to refuse."""
    start = 0
    for end, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start : end + 1]):
            yield script[start : end + 1]
            start = end + 1
    rest = script[start:]
    if any(line.strip() and not line.strip().startswith("--") for line in rest.splitlines()):
        yield rest


class _Target:
    """:class:`~cebroker.storage.migrations.SchemaTarget` over a connection in explicit
    transaction mode (``isolation_level=None``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    @contextmanager
    def step(self) -> Iterator[None]:
        # executescript() would commit first; each statement runs in this transaction instead.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def versions(self) -> dict[str, int]:
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions"
            " (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        return {
            str(c): int(v) for c, v in self._conn.execute("SELECT component, version FROM schema_versions")
        }

    def apply(self, step: Step) -> None:
        for statement in statements(step.text):
            self._conn.execute(statement)

    def record(self, component: str, version: int) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO schema_versions (component, version) VALUES (?, ?)", (component, version)
        )


def migrate(conn: sqlite3.Connection, path: Path) -> list[str]:
    """Bring every component's schema up to date, one transaction per step; returns the steps
    applied.

    Raises:
        SchemaTooNew: the file was written by a newer release; nothing was changed.
    """
    return migrations.migrate(_Target(conn), STEPS, str(path))
