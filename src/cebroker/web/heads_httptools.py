"""uvicorn's httptools protocol with the head limits of :mod:`cebroker.web.heads` (a module of
its own: httptools is optional, h11 is not), and the route it serves past the app
(:mod:`cebroker.web.direct`).

httptools calls ``on_url`` with each piece of the request target, but ``on_header`` only once a
value is complete, buffering the value until then: so the bytes received while a head is
incomplete are counted as they arrive (a refusal comes at most one socket read past the
limit), and the exact size and count are checked once the head is complete, before the
request is handed to the application. Nothing of a refused request reaches it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

import uvicorn
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

from cebroker.web.corked import CorkedTransport
from cebroker.web.deadline import Deadline
from cebroker.web.direct import BODY_HELD, RawHeaders
from cebroker.web.heads import LINE_OVERHEAD, HeadGuard, direct_of, limits_of

#: A request held for the direct route: its cycle (whose body the route reads) and the app that
#: serves it if the route does not.
_Held = tuple[RequestResponseCycle, ASGI3Application]


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head limits of its configuration."""

    def __init__(
        self, config: uvicorn.Config, server_state: Any, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.guard = HeadGuard(limits_of(config), self.loop, self._responding)
        self._in_head = True
        # Not while access lines are written: uvicorn writes them as it answers (at INFO).
        logged = self.access_log and self.access_logger.isEnabledFor(logging.INFO)
        self._direct = None if logged else direct_of(config)
        # Set while uvicorn starts the request whose head just ended: its ASGI task is held.
        self._deferring = False
        self._held: _Held | None = None
        #: This connection's last direct answer, written again while it stays the same.
        self.last_answer: _Made | None = None
        # The keep-alive clock: it runs while the connection is idle (see on_response_complete).
        self._idle = Deadline(self.loop, self.timeout_keep_alive, self.timeout_keep_alive_handler)

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
        self._idle.cancel()
        held, self._held = self._held, None
        super().connection_lost(exc)
        if held is not None:
            # A body that never ended: the app reads it as the ASGI path would, finds the
            # connection gone, and counts the incomplete request.
            self.start_held(held)

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
        direct = self._direct
        # Offered to the direct route once its body is complete: only what needs nothing of the
        # app's handling of the connection (see cebroker.web.direct).
        self._deferring = (
            direct is not None
            and self.url == direct.path
            and self.parser.get_method() == direct.method
            and not self.expect_100_continue
            and _declared(headers) <= BODY_HELD
        )
        try:
            super().on_headers_complete()
        finally:
            self._deferring = False

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        # uvicorn calls this for a request that is not pipelined behind another, and with the
        # app it chose (a 503 app past its concurrency limit: that one is never held).
        if self._deferring and app is self.app:
            self._held = (cycle, app)
            return
        super()._start_asgi_task(cycle, app)

    def on_body(self, body: bytes) -> None:
        if not self.guard.refused:
            super().on_body(body)
            held = self._held
            if held is not None and len(held[0].body) > BODY_HELD:
                # The server stops reading until the app reads: the app must have it now.
                self._held = None
                self.start_held(held)

    def on_message_complete(self) -> None:
        if self.guard.refused:
            return
        super().on_message_complete()
        # What follows on this connection is the next request's head.
        self._in_head = True
        self.guard.received = 0
        held, self._held = self._held, None
        if held is not None and self._direct is not None:
            cycle = held[0]
            if not self._direct.take(self.headers, bytes(cycle.body), _Reply(self, held)):
                self.start_held(held)

    def on_response_complete(self) -> None:
        # uvicorn's, but with one keep-alive timer per connection instead of a call_later and a
        # cancel per request (see Deadline): an answer only starts the idle clock, which closes
        # the connection once it has been idle for the whole timeout since its last answer.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle.start()

    def _unset_keepalive_if_required(self) -> None:
        # Data arrived (or the connection ends): the connection is no longer idle.
        self._idle.stop()
        super()._unset_keepalive_if_required()

    def start_held(self, held: _Held) -> None:
        """Start the app for a held request: the direct route left or declined it, its body
        grew past what is held, or its connection was lost before the body ended."""
        super()._start_asgi_task(*held)


def _declared(headers: RawHeaders) -> int:
    """The body length a head declares (0 without ``Content-Length``: a chunked body is held
    until it passes :data:`BODY_HELD`); the app answers a declared length over its limit at
    once, without waiting for a body that may never come."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else BODY_HELD + 1
    return 0


@dataclass(frozen=True, slots=True)
class _Made:
    """The bytes of a connection's last direct answer and what they were made of: the server's
    default headers (by identity), the route's headers (by identity) and body, the status and
    whether the connection stays open."""

    defaults: list[tuple[bytes, bytes]]
    headers: RawHeaders
    body: bytes
    status: int
    keep_alive: bool
    data: bytes


class _Reply:
    """A held request's answer, written as uvicorn writes a complete one (see
    ``RequestResponseCycle.send``), or its hand-over to the app."""

    __slots__ = ("_protocol", "_held", "_done")

    def __init__(self, protocol: LimitedHttpToolsProtocol, held: _Held) -> None:
        self._protocol = protocol
        self._held = held
        self._done = False

    def _settle(self) -> None:
        if self._done:
            raise RuntimeError("a direct request is answered once")
        self._done = True

    def answer(self, status: int, headers: RawHeaders, body: bytes) -> None:
        self._settle()
        cycle = self._held[0]
        if cycle.disconnected:
            return
        protocol = self._protocol
        defaults = cycle.default_headers  # a new list when the server's date header changes
        last = protocol.last_answer
        if (
            last is not None
            and last.defaults is defaults
            and last.headers is headers
            and last.body is body
            and last.status == status
            and last.keep_alive == cycle.keep_alive
        ):
            answer = last.data  # a connection's answers repeat (same headers, same second)
        else:
            content = [STATUS_LINE[status]]
            for name, value in defaults:
                content.extend((name, b": ", value, b"\r\n"))
            for name, value in headers:
                content.extend((name, b": ", value, b"\r\n"))
            if not cycle.keep_alive:
                content.append(b"connection: close\r\n")
            content.extend((b"\r\n", body))
            answer = b"".join(content)
            protocol.last_answer = _Made(defaults, headers, body, status, cycle.keep_alive, answer)
        cycle.response_started = cycle.response_complete = True
        transport = protocol.transport
        transport.write(answer)
        cycle.message_event.set()
        if not cycle.keep_alive:
            transport.close()
        cycle.on_response()

    def decline(self) -> None:
        self._settle()
        if not self._held[0].disconnected:
            self._protocol.start_held(self._held)
