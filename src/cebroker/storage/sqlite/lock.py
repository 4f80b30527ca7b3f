"""One broker per SQLite file: an exclusive ``flock`` on ``<database>.lock``, held for life.

Two brokers on one file would each keep an index that misses the other's subscription changes,
so events accepted by one would silently not reach subscriptions created on the other. The lock
is taken before anything else opens the database and released when the storage closes (or the
process ends, whichever way). It is a ``flock`` on a file of its own rather than a POSIX
(``fcntl``) lock because SQLite holds POSIX locks on the database itself, and those are dropped
whenever any descriptor of that file in the process is closed. The holder writes its pid, host
and start time into the file, so that the refused instance can say who holds it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from cebroker.storage.errors import StorageInUse, StorageUnavailable


class DatabaseLock:
    """The exclusive lock of one database file; see the module docstring."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = database.with_name(database.name + ".lock")
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock without waiting; idempotent.

        Raises:
            StorageInUse: another process (or another storage object) holds it.
            StorageUnavailable: the lock file cannot be created.
        """
        if self._fd is not None:
            return
        try:
            # Owner only, as the database beside it (it names the host and the process).
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StorageUnavailable("cannot create the lock file", f"{self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StorageUnavailable("cannot lock the database", f"{self.path}: {exc.strerror}") from exc
            raise StorageInUse(
                f"the database {self.database} is in use by another broker ({holder}); one broker per"
                " SQLite file: stop that one or give this one another database"
            ) from None
        since = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since})
        # Should this fail, the lock holds anyway; only the description of the holder is missing.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, record.encode() + b"\n", 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (the file stays, so no one ever locks an unlinked file); idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the only descriptor of this open file releases the flock


def _holder(fd: int) -> str:
    """Who holds the lock, from what the holder wrote into the file."""
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        return "holder not recorded yet"
    return f"pid {record.get('pid')} on {record.get('host')}, since {record.get('since')}"
