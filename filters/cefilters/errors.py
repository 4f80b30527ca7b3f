"""The error raised for every invalid filter, shared by all dialects."""

from __future__ import annotations

__all__ = ["FilterError"]


class FilterError(ValueError):
    """An invalid filter; ``path`` is a JSON Pointer into the filters array (``/0/all/1/sql``)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")
