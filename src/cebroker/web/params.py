"""Query parameters of routes that take none."""

from __future__ import annotations

from starlette.datastructures import QueryParams

from cebroker.web.problem import request_error


def no_parameters(params: QueryParams) -> None:
    """Creating, replacing, deleting and re-driving take no query parameters: refuse any (400
    naming it) before anything is read or written, rather than ignore what the client meant."""
    for name in params:
        raise request_error("parameter", name[:64], "this operation takes no query parameters")
