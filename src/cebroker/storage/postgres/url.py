"""The database URL: what psycopg connects with, and what messages may show of it."""

from __future__ import annotations

from cebroker.options.kinds import redact_url


def display_name(url: str) -> str:
    """The URL for messages and logs, its password replaced by ``***``."""
    return redact_url(url)
