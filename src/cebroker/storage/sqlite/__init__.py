"""The embedded SQLite backend (see :mod:`cebroker.storage.sqlite.database` for its threads and
its durability policy)."""

from cebroker.storage.sqlite.backend import SqliteStorage

__all__ = ["SqliteStorage"]
