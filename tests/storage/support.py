"""The storage backends every contract suite runs against, and small helpers.

A backend joins the suites with one entry in :data:`STORAGES`: a factory of an unopened
:class:`Storage` from the test's fixture request, a scratch directory and options. Called twice
in one test it must give the same stored data (the suites reopen storage to check durability).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from cebroker.storage import Storage, StorageOptions
from cebroker.storage import migrations as runner
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.postgres.migrations import STEPS, _Target
from cebroker.storage.sqlite import SqliteStorage

S = TypeVar("S", bound=Storage)


def sqlite_storage(request: pytest.FixtureRequest, tmp: Path, **options: Any) -> Storage:
    """The embedded backend on ``tmp/broker.db``."""
    return SqliteStorage(tmp / "broker.db", StorageOptions(**options))


def postgres_storage(request: pytest.FixtureRequest, tmp: Path, **options: Any) -> Storage:
    """The PostgreSQL backend on the test's own database, the broker's schema already in it (the
    ``migrated_postgres_url`` fixture: the same database for every call within one test)."""
    return PostgresStorage(str(request.getfixturevalue("migrated_postgres_url")), StorageOptions(**options))


#: Every backend the contract suites run against: a factory of ``(request, scratch dir, options)``.
STORAGES: dict[str, Callable[..., Storage]] = {"sqlite": sqlite_storage, "postgres": postgres_storage}

#: The markers of the backends that need a real server (for the lanes: ``-m "not postgres"``).
_MARKS = {"postgres": pytest.mark.postgres}

#: The backends' names as pytest parameters, each with its server's marker.
BACKEND_PARAMS = [pytest.param(name, marks=_MARKS.get(name, ())) for name in sorted(STORAGES)]


@contextlib.asynccontextmanager
async def opened(storage: S) -> AsyncIterator[S]:
    """``storage``, open for the duration of the block."""
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()


#: The deliveries component's schema version, on PostgreSQL.
DELIVERIES_VERSION = "SELECT version FROM schema_versions WHERE component = 'deliveries'"


def at_deliveries_step(url: str, step: int) -> None:
    """The PostgreSQL database of ``url`` with the deliveries schema as the release of ``step``
    left it (the other components current): the start of an upgrade test."""
    steps = {**STEPS, "deliveries": STEPS["deliveries"][:step]}
    with psycopg.connect(url, autocommit=True) as conn:
        runner.migrate(_Target(conn), steps, "test")
        assert conn.execute(DELIVERIES_VERSION).fetchone() == (step,)


def claims_held(url: str) -> dict[str, int]:
    """Per subscription, the count of claimed deliveries the PostgreSQL schema keeps
    (``pipeline_claims_held``: what was claimed less what was freed)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT subscription, held FROM pipeline_claims_held")
        return {str(s): int(n) for s, n in rows}
