"""``GET /sources`` (each source's name, protocol and health) and ``GET /sources/{name}/rejects``
(the messages a source refused, oldest first: ``?limit=`` up to 500, ``?after=`` the ``seq`` of
the last one seen; ``next`` is the ``after`` of the following page)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from cebroker.errors import NotFound
from cebroker.web.problem import request_error

if TYPE_CHECKING:
    from cebroker.sources.component import SourcesComponent

MAX_PAGE = 500


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
        raise request_error("parameter", name, f"must be an integer from {low} to {high}")
    return int(raw)


class SourcesApi:
    """Read-only views of the sources."""

    def __init__(self, component: SourcesComponent) -> None:
        self._component = component

    def routes(self) -> Sequence[BaseRoute]:
        """The two routes."""
        return [
            Route("/sources", self.list_sources, methods=["GET"]),
            Route("/sources/{name}/rejects", self.rejects, methods=["GET"]),
        ]

    async def list_sources(self, request: Request) -> Response:
        """Every source with its counters (the URL is not shown: it may carry credentials)."""
        now = time.monotonic()
        items: list[dict[str, Any]] = []
        for source, up in self._component.health():
            stats = source.receiver.stats
            items.append(
                {
                    "name": source.name,
                    "protocol": urlsplit(source.receiver.source).scheme,
                    "consuming": up,
                    "downSeconds": None if source.down_since is None else round(now - source.down_since, 1),
                    "received": stats.received,
                    "accepted": stats.accepted,
                    "invalid": stats.invalid,
                    "restarts": source.restarts,
                    "rejectsUrl": f"/sources/{source.name}/rejects",
                }
            )
        return JSONResponse(items)

    async def rejects(self, request: Request) -> Response:
        """One page of a source's refused messages."""
        name = str(request.path_params["name"])
        source = self._component.source(name)
        if source is None:
            raise NotFound(f"no source named {name[:64]!r}")
        for param in request.query_params:
            if param not in ("limit", "after"):
                raise request_error("parameter", param[:64], "unknown parameter; known: limit, after")
        limit = _int_param(request, "limit", 100, 1, MAX_PAGE)
        after = _int_param(request, "after", 0, 0, 2**63 - 1)
        page = source.rejects.page(after, limit)
        return JSONResponse(
            {
                "source": source.name,
                "items": [kept.to_json() for kept in page],
                "dropped": source.rejects.dropped,
                "next": page[-1].seq if len(page) == limit else None,
            }
        )
