"""The database files are the owner's only (issue: hardening, finding 11): a ``cebroker serve``
process creates its SQLite file, its ``-wal`` and ``-shm`` files, its lock file and its secrets
key with mode 0600, whatever the process's umask allows; a database an earlier release left
readable by others is reported at start."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hostile.support import HostileBroker


def _permissive_umask() -> None:
    os.umask(0o022)  # the common default, under which SQLite's own files would be 0644


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[HostileBroker]:
    process = HostileBroker(
        tmp_path / "data" / "files.db",
        tmp_path / "broker.log",
        "--webhook-validation",
        "off",
        preexec=_permissive_umask,
    )
    process.start()
    try:
        process.ready()
        yield process
    finally:
        process.close()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_database_files_are_created_0600(broker: HostileBroker, tmp_path: Path) -> None:
    # A write, so that the WAL and the shared memory file exist.
    created = httpx.post(
        f"{broker.url}/subscriptions", json={"protocol": "HTTP", "sink": "http://127.0.0.1:9/x"}, timeout=10
    )
    assert created.status_code == 201
    db = tmp_path / "data" / "files.db"
    files = [db, db.with_name("files.db-wal"), db.with_name("files.db-shm"), db.with_name("files.db.lock")]
    files.append(db.with_name("files.db.key"))
    modes = {path.name: oct(_mode(path)) for path in files}
    assert modes == {path.name: oct(0o600) for path in files}


def test_a_database_others_may_read_is_reported(broker: HostileBroker, tmp_path: Path) -> None:
    db = tmp_path / "data" / "files.db"
    broker.terminate()
    db.chmod(0o644)
    broker.start().ready()
    assert any("has mode 0644: other users may read it" in line for line in broker.log_lines())
