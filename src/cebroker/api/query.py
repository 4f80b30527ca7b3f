"""The query parameters of ``GET /subscriptions`` and the ``Link`` header to the next page."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.datastructures import QueryParams

from cebroker.storage.subscriptions import SubscriptionQuery
from cebroker.web.problem import request_error

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
#: Every parameter the listing understands; any other is refused (a typo would widen the result).
PARAMETERS = ("protocol", "source", "type", "sink", "limit", "cursor")


def parse_query(params: QueryParams) -> SubscriptionQuery:
    """The store query for these parameters; 400 naming the parameter when one is wrong."""
    for name in params:
        if name not in PARAMETERS:
            raise request_error("parameter", name[:64], f"unknown parameter; known: {', '.join(PARAMETERS)}")
        if len(params.getlist(name)) > 1:
            raise request_error("parameter", name, "give it at most once")
    values: dict[str, str] = {}
    for name in ("protocol", "source", "type", "sink", "cursor"):
        value = params.get(name)
        if value is not None:
            if not value:
                raise request_error("parameter", name, "must not be empty (leave it out instead)")
            values[name] = value
    limit = DEFAULT_LIMIT
    raw_limit = params.get("limit")
    if raw_limit is not None:
        if not raw_limit.isascii() or not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
            raise request_error("parameter", "limit", f"must be an integer between 1 and {MAX_LIMIT}")
        limit = int(raw_limit)
    return SubscriptionQuery(limit=limit, **values)


def next_link(base: str, query: SubscriptionQuery, cursor: str) -> str:
    """A ``Link`` header value pointing at the page after ``cursor`` with the same filters."""
    params: dict[str, str] = {}
    for name in ("protocol", "source", "type", "sink"):
        value = getattr(query, name)
        if value is not None:
            params[name] = value
    params["limit"] = str(query.limit)
    params["cursor"] = cursor
    return f'<{base}/subscriptions?{urlencode(params)}>; rel="next"'
