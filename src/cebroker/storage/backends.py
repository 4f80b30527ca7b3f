"""The registry of storage backends: a URL scheme names a factory.

A plain path, or a ``sqlite:`` URL (``sqlite:relative/file.db``, ``sqlite:///absolute/file.db``),
is the embedded SQLite backend; a ``postgresql://`` (or ``postgres://``) URL is the PostgreSQL
backend, which several broker instances may share. A backend joins by adding one entry to
:data:`BACKENDS`; its module is imported only when it is used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from cebroker.storage.base import Storage, StorageOptions

StorageFactory = Callable[[str, StorageOptions], Storage]


def _sqlite(url: str, options: StorageOptions) -> Storage:
    from pathlib import Path

    from cebroker.storage.sqlite import SqliteStorage

    if url.startswith("sqlite:"):
        parts = urlsplit(url)
        url = unquote(parts.path if parts.netloc in ("", "localhost") else "")
        if not url:
            raise ValueError("a sqlite: URL names a file: sqlite:relative.db or sqlite:///absolute.db")
    return SqliteStorage(Path(url), options)


def _postgres(url: str, options: StorageOptions) -> Storage:
    try:
        from cebroker.storage.postgres import PostgresStorage
    except ImportError as exc:
        if exc.name not in ("psycopg", "psycopg_pool"):
            raise
        raise ValueError(
            "the PostgreSQL backend needs the postgres extra: pip install 'cebroker[postgres]'"
        ) from exc
    scheme, _, rest = url.partition(":")
    return PostgresStorage(f"{scheme.lower()}:{rest}", options)  # libpq knows the lower-case schemes


#: URL scheme -> backend factory.
BACKENDS: dict[str, StorageFactory] = {"sqlite": _sqlite, "postgresql": _postgres, "postgres": _postgres}

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def create_storage(target: str | os.PathLike[str], options: StorageOptions | None = None) -> Storage:
    """The storage at ``target`` (a URL of a registered backend, or a SQLite file path), not yet
    prepared or opened.

    Raises:
        ValueError: ``target`` is a URL of no registered backend, or a malformed one.
    """
    text = os.fspath(target)
    chosen = options or StorageOptions()
    match = _URL.match(text)
    if match is not None:
        scheme = match.group(1).lower()
        if scheme in BACKENDS:
            return BACKENDS[scheme](text, chosen)
        if text[match.end() :].startswith("//"):
            raise ValueError(
                f"{text}: no storage backend for {scheme}: URLs"
                f" (known: {', '.join(sorted(BACKENDS))}, or a SQLite file path)"
            )
    return BACKENDS["sqlite"](text, chosen)
