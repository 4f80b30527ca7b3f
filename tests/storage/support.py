"""The storage backends every contract suite runs against, and small helpers.

A backend joins the suites with one entry in :data:`STORAGES`: a factory of an unopened
:class:`Storage` from a scratch directory and options. Called twice with the same directory it
must give the same stored data (the suites reopen storage to check durability).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from cebroker.storage import Storage, StorageOptions
from cebroker.storage.sqlite import SqliteStorage


def sqlite_storage(tmp: Path, **options: Any) -> Storage:
    """The embedded backend on ``tmp/broker.db``."""
    return SqliteStorage(tmp / "broker.db", StorageOptions(**options))


#: Every backend the contract suites run against.
STORAGES: dict[str, Callable[..., Storage]] = {"sqlite": sqlite_storage}


@contextlib.asynccontextmanager
async def opened(storage: Storage) -> AsyncIterator[Storage]:
    """``storage``, open for the duration of the block."""
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()
