"""The library's one exception: an invalid filter, located by a JSON Pointer.

::

    ValueError
    └── FilterError                 (path, message)
        └── cefilters.sql.ParseError (adds the position inside the expression)
"""

from __future__ import annotations

__all__ = ["FilterError", "pointer_token"]


class FilterError(ValueError):
    """An invalid filter, rejected when it is compiled.

    Attributes:
        path: an RFC 6901 JSON Pointer into the ``filters`` array, such as ``/0/all/1/sql``
            (``""`` is the array itself). Callers that embed the array in a larger document
            prefix it (``/filters`` + path).
        message: what is wrong, without the path.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")

    def __reduce__(self) -> tuple[type[FilterError], tuple[str, str]]:
        # Keeps the two-argument constructor picklable (Spark ships errors between processes).
        return (type(self), (self.path, self.message))


def pointer_token(key: str | int) -> str:
    """One JSON Pointer reference token, escaped as RFC 6901 section 3 requires."""
    return str(key).replace("~", "~0").replace("/", "~1")
