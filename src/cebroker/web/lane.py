"""A fast lane through the ASGI stack for one hot call (``POST /events``).

Starlette runs every call through its error middleware, the broker's middleware, its exception
middleware, the router and the endpoint adapter: each layer wraps ``send`` in a closure of its
own and some build a ``Request``, which together cost more per call than decoding, validating,
matching and committing a small event does. :class:`Lane` sends the calls of one method and
path straight to an endpoint that has already been given its guard (the access middleware), and
gives them the same answers the stack would: a refused or failed call gets the problem+json the
app's exception handlers make of it, and once sending a response has failed the rest of it is
dropped (as ``SendGuard`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("cebroker")

#: What turns an exception into an answer (the app's exception handlers).
Handler = Callable[[Request, Exception], Awaitable[Response]]


def _handler(handlers: Mapping[type[BaseException], Handler], exc: Exception) -> Handler | None:
    """The most specific of ``handlers`` along ``exc``'s class hierarchy."""
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            return handler
    return None


class Answering:
    """ASGI: ``endpoint``, its exceptions answered by ``handlers`` (as Starlette's exception
    middleware does, inside the middleware that observes the answer: request metrics and spans
    see the status of the problem answer)."""

    def __init__(self, endpoint: ASGIApp, handlers: Mapping[type[BaseException], Handler]) -> None:
        self._endpoint = endpoint
        self._handlers = dict(handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._endpoint(scope, receive, sending)
        except Exception as exc:
            handler = _handler(self._handlers, exc)
            if started or handler is None:
                raise
            response = await handler(Request(scope, receive), exc)
            await response(scope, receive, send)


class Lane:
    """ASGI: ``method`` calls to ``path`` go to ``endpoint``, every other call to ``app``.

    Args:
        handlers: the app's exception handlers, by exception class; the most specific one
            (along the exception's class hierarchy) answers an exception that reaches the lane
            (as Starlette's error middleware would).
        route: what the router would have put in the call's ``scope["route"]`` (read by the
            request metrics for the route template).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        method: str,
        path: str,
        endpoint: ASGIApp,
        handlers: Mapping[type[BaseException], Handler],
        route: object = None,
    ) -> None:
        self.app = app
        self._method = method
        self._path = path
        self._endpoint = endpoint
        self._handlers = dict(handlers)
        self._route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path or scope["method"] != self._method:
            await self.app(scope, receive, send)
            return
        if self._route is not None:
            scope["route"] = self._route
        started = broken = False

        async def guarded(message: Message) -> None:
            nonlocal started, broken
            if broken:
                return
            started = True
            try:
                await send(message)
            except Exception as exc:  # the server's own error for a connection it gave up on
                broken = True
                log.debug("response to %s dropped: %s", self._path, exc)

        try:
            await self._endpoint(scope, receive, guarded)
        except Exception as exc:
            handler = _handler(self._handlers, exc)
            if started or handler is None:
                raise
            response = await handler(Request(scope, receive), exc)
            await response(scope, receive, guarded)
