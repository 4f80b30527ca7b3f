"""uvicorn's httptools protocol with the head limits of :mod:`cebroker.web.heads` (a module of
its own: httptools is optional, h11 is not).

httptools calls ``on_url`` with each piece of the request target, but ``on_header`` only once a
value is complete, buffering the value until then: so the bytes received while a head is
incomplete are counted as they arrive (a refusal comes at most one socket read past the
limit), and the exact size and count are checked once the head is complete, before the
request is handed to the application. Nothing of a refused request reaches it.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from cebroker.web.corked import CorkedTransport
from cebroker.web.heads import LINE_OVERHEAD, HeadGuard, limits_of


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head limits of its configuration."""

    def __init__(
        self, config: uvicorn.Config, server_state: Any, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.guard = HeadGuard(limits_of(config), self.loop, self._responding)
        self._in_head = True

    def _responding(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not subclasses of asyncio.Transport).
        stream = cast(asyncio.Transport, transport)
        # Each answer's head and body go out in one write (see web.corked).
        super().connection_made(cast(asyncio.Transport, CorkedTransport(stream, self.loop)))
        self.guard.opened(stream)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.closed()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        guard = self.guard
        if guard.refused:
            guard.drop(data)
            return
        if self._in_head:
            guard.received += len(data)
            guard.arm()
        super().data_received(data)
        # Still inside one head after this read: everything counted so far is head.
        if self._in_head and not guard.refused and guard.received > guard.limits.max_bytes:
            guard.too_long(url_complete=True)  # a target over its own limit is refused earlier

    def send_400_response(self, msg: str) -> None:
        if not self.guard.refused:  # a broken request after a refusal needs no second answer
            super().send_400_response(msg)

    def on_message_begin(self) -> None:
        self._in_head = True
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        if self.guard.refused:
            return
        super().on_url(url)
        if len(self.url) > self.guard.limits.max_url:
            self.guard.url_too_long()

    def on_headers_complete(self) -> None:
        self._in_head = False
        guard = self.guard
        if guard.refused:
            return
        # The exact measure, once per request (cheaper than a check per header): the bytes
        # counted as they came bound a head only while it is incomplete.
        headers = self.headers
        if len(headers) > guard.limits.max_count:
            guard.too_many()
            return
        size = len(self.url) + LINE_OVERHEAD + sum(len(name) + len(value) + 4 for name, value in headers)
        if size > guard.limits.max_bytes:
            guard.too_long(url_complete=True)
            return
        guard.complete()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.guard.refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self.guard.refused:
            return
        super().on_message_complete()
        # What follows on this connection is the next request's head.
        self._in_head = True
        self.guard.received = 0
