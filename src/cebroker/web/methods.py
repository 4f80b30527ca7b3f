"""An ASGI endpoint that routes by HTTP method itself, so that it owns 405 and ``Allow``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

#: One method's handler.
Handler = Callable[[Request], Awaitable[Response]]


class MethodRouter:
    """Calls the handler of the request's method; 405 with ``Allow`` for any other method, and
    ``Allow`` on every OPTIONS answer.

    (A plain Starlette endpoint function would get Starlette's own method handling.)
    """

    def __init__(self, handlers: dict[str, Handler]) -> None:
        self.handlers = handlers
        self.allow = ", ".join(handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        handler = self.handlers.get(request.method)
        if handler is None:
            raise HTTPException(
                405,
                f"{request.method[:32]} is not supported here; allowed: {self.allow}",
                {"Allow": self.allow},
            )
        response = await handler(request)
        if request.method == "OPTIONS":
            response.headers["Allow"] = self.allow
        await response(scope, receive, send)
