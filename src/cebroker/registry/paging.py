"""``?sort`` and pagination (``?limit``, ``Link: <next>;rel=next;count=N``) of collection reads.

* ``?sort=<attr>[=asc|desc]`` orders a collection by one attribute of its entities (strings
  compared ignoring case, numbers as numbers; entities without the attribute last, whatever
  the direction), ties by id. Without it a paginated collection is ordered by id (ignoring
  case); an unpaginated one keeps creation order.
* ``?limit=N`` (1 to :data:`MAX_LIMIT`) returns at most ``N`` entities and, when more follow,
  ``Link: <url>;rel=next;count=<all>`` whose URL (the same request with ``offset``) gives the
  next page. ``offset`` is this server's cursor: clients follow the link rather than build it.

The page is cut from the collection as the read renders it (filter applied): a page of a large
collection costs the read of the whole collection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from cebroker.registry.errors import XRegistryError

#: the largest page
MAX_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Paging:
    """The ``sort``, ``limit`` and ``offset`` of a collection read."""

    sort: str | None = None
    descending: bool = False
    limit: int | None = None
    offset: int = 0

    @property
    def active(self) -> bool:
        """Whether the collection is sorted or cut."""
        return self.sort is not None or self.limit is not None


def parse_paging(query: Mapping[str, str], subject: str) -> Paging:
    """The flags of ``query`` (``bad_sort``, ``bad_flag`` for values out of range)."""
    sort: str | None = None
    descending = False
    if "sort" in query:
        attr, _, order = query["sort"].partition("=")
        if not attr or order.lower() not in ("", "asc", "desc"):
            raise XRegistryError("bad_sort", subject, sort=query["sort"])
        sort, descending = attr, order.lower() == "desc"
    limit: int | None = None
    if "limit" in query:
        value = query["limit"]
        if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
            raise XRegistryError("bad_flag", subject, flag=f"limit={value}")
        limit = int(value)
    offset = 0
    if "offset" in query:
        value = query["offset"]
        if not value.isdigit():
            raise XRegistryError("bad_flag", subject, flag=f"offset={value}")
        offset = int(value)
    return Paging(sort, descending, limit, offset)


def _key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (1, str(value))
    if isinstance(value, int | float):
        return (0, value)
    return (1, str(value).lower())


def page(collection: dict[str, Any], paging: Paging) -> tuple[dict[str, Any], int, bool]:
    """The entities of ``collection`` (a rendered ``{id: entity}`` map) on the requested page, the
    collection's size, and whether more follow."""
    items = sorted(collection.items(), key=lambda item: item[0].lower())
    if paging.sort is not None:
        attr = paging.sort
        present = [i for i in items if isinstance(i[1], dict) and i[1].get(attr) is not None]
        absent = [i for i in items if not (isinstance(i[1], dict) and i[1].get(attr) is not None)]
        groups: dict[int, list[tuple[str, Any]]] = {}
        for item in present:
            groups.setdefault(_key(item[1][attr])[0], []).append(item)
        ordered = []
        for kind in sorted(groups):  # numbers, then the rest (strings compared ignoring case)
            ordered += sorted(groups[kind], key=lambda i: _key(i[1][attr])[1], reverse=paging.descending)
        items = ordered + absent
    total = len(items)
    if paging.limit is None:
        return dict(items), total, False
    cut = items[paging.offset : paging.offset + paging.limit]
    return dict(cut), total, paging.offset + paging.limit < total


def next_link(url: str, query: Mapping[str, str], paging: Paging, total: int) -> str:
    """The ``Link`` header value of the next page."""
    params = [(k, v) for k, v in query.items() if k != "offset"]
    params.append(("offset", str(paging.offset + (paging.limit or 0))))
    return f"<{url}?{urlencode(params)}>;rel=next;count={total}"
