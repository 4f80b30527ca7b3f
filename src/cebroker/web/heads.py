"""Limits on request heads, enforced by the HTTP server before any route (or authentication)
runs, on both HTTP/1.1 parsers uvicorn offers (httptools, the default, and h11).

A request head (request line and header fields) is refused when

* the request target is longer than ``max_url`` bytes: ``414 URI Too Long``;
* the head is larger than ``max_bytes`` in all, or has more than ``max_count`` header
  fields: ``431 Request Header Fields Too Large``;
* it has not arrived whole ``timeout`` seconds after its first byte (or after the connection
  was opened): ``408 Request Timeout`` (a connection that sent nothing is just closed).

httptools hands uvicorn a header only once its value is complete and buffers the value until
then, without a limit: the protocol below counts the bytes it receives while a head is
incomplete, so a 64 MiB header costs at most ``max_bytes`` plus one read of the socket before
the connection is answered and closed. h11 buffers a head up to its
``max_incomplete_event_size``, which is set to ``max_bytes``; its refusal is answered 431 (or 414)
here instead of uvicorn's generic 400.

A refusal is an ``application/problem+json`` answer naming the ``header`` part (or the request
target), with ``Connection: close``. What the client keeps sending after it is read and dropped
for a short while (at most :data:`LINGER_BYTES` or :data:`LINGER_SECONDS`), so that the answer
is not lost to a reset of the connection, and then the connection is closed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from cebroker.web.corked import CorkedTransport
from cebroker.web.deadline import Deadline
from cebroker.web.direct import DirectRoute

#: After a refusal: how much more of the request is read and dropped, and for how long, before
#: the connection is closed.
LINGER_BYTES = 1024 * 1024
LINGER_SECONDS = 1.0

#: What a request line adds to its target: method, spaces, version, line end.
LINE_OVERHEAD = 32

_REASONS = {408: "Request Timeout", 414: "URI Too Long", 431: "Request Header Fields Too Large"}


@dataclass(frozen=True, slots=True)
class HeadLimits:
    """The limits of one request head (see the module docstring); the settings give them."""

    max_bytes: int = 32 * 1024
    max_count: int = 100
    max_url: int = 8 * 1024
    timeout: float = 10.0


class LimitedConfig(uvicorn.Config):
    """uvicorn's configuration with the head limits the protocols below read, and the route
    the httptools protocol serves directly (``direct``; the h11 protocol does not)."""

    def __init__(
        self, app: Any, *, head_limits: HeadLimits, direct: DirectRoute | None = None, **kwargs: Any
    ) -> None:
        # h11 refuses a head over this size itself; the protocol answers 431 for it.
        kwargs.setdefault("h11_max_incomplete_event_size", head_limits.max_bytes)
        super().__init__(app, **kwargs)
        self.head_limits = head_limits
        #: The route the httptools protocol serves past the app (:mod:`cebroker.web.direct`).
        self.direct = direct


def direct_of(config: uvicorn.Config) -> DirectRoute | None:
    """The route a protocol built with ``config`` serves past the app, if any."""
    return config.direct if isinstance(config, LimitedConfig) else None


def limits_of(config: uvicorn.Config) -> HeadLimits:
    """The head limits a protocol built with ``config`` enforces (the defaults unless it is a
    :class:`LimitedConfig`)."""
    return config.head_limits if isinstance(config, LimitedConfig) else HeadLimits()


def refusal_bytes(status: int, detail: str, *, part: str, name: str) -> bytes:
    """A complete HTTP/1.1 answer: ``status`` as problem+json, then the connection closes."""
    body = json.dumps(
        {
            "type": "https://cebroker.dev/problems/request-head",
            "title": _REASONS[status],
            "status": status,
            "detail": detail,
            "errors": [{part: name, "detail": detail}],
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class HeadGuard:
    """The per-connection state both protocols share: the head's timer, the refusal (once
    given, nothing else is read) and the lingering close after it."""

    def __init__(self, limits: HeadLimits, loop: asyncio.AbstractEventLoop, busy: Callable[[], bool]) -> None:
        self.limits = limits
        self._loop = loop
        #: Whether a response is being written on the connection (a pipelined head refused
        #: meanwhile closes the connection without an answer that would cut into it).
        self._busy = busy
        self._transport: asyncio.Transport | None = None
        #: The current head's clock: it runs from the head's first byte to its end.
        self._clock = Deadline(loop, limits.timeout, self._expired)
        self._linger: asyncio.TimerHandle | None = None
        self._dropped = 0
        #: Bytes of the current head received so far (0: none of it yet).
        self.received = 0
        self.refused = False

    def opened(self, transport: asyncio.Transport) -> None:
        """The connection is open: its first head must arrive within the timeout."""
        self._transport = transport
        self.arm()

    def arm(self) -> None:
        """Start the head's clock, unless it runs already (one timer serves the heads of a
        kept-alive connection one after the other: see `Deadline`)."""
        if not self.refused:
            self._clock.start()

    def complete(self) -> None:
        """The head arrived whole: stop its clock and its count."""
        self._clock.stop()
        self.received = 0

    def closed(self) -> None:
        """The connection is gone: stop every timer."""
        self._clock.cancel()
        self.received = 0
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def drop(self, data: bytes) -> None:
        """After a refusal: read ``data`` and drop it, closing once enough has been dropped."""
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES:
            self._close()

    def too_long(self, url_complete: bool) -> None:
        """The head went past ``max_bytes`` (414 when its request line is not even complete)."""
        if url_complete:
            self.refuse(
                431,
                f"the request's header fields are over {self.limits.max_bytes} bytes",
                part="header",
                name="*",
            )
        else:
            self.url_too_long()

    def url_too_long(self) -> None:
        """The request target went past ``max_url``."""
        self.refuse(414, f"the request target is over {self.limits.max_url} bytes", part="target", name="url")

    def too_many(self) -> None:
        """The head has more than ``max_count`` header fields."""
        self.refuse(
            431, f"the request has over {self.limits.max_count} header fields", part="header", name="*"
        )

    def refuse(self, status: int, detail: str, *, part: str, name: str) -> None:
        """Answer ``status`` and close the connection (after a short linger)."""
        if self.refused or self._transport is None:
            return
        self.refused = True
        self.complete()
        transport = self._transport
        if transport.is_closing():
            return
        if self._busy():
            transport.close()
            return
        transport.write(refusal_bytes(status, detail, part=part, name=name))
        if transport.can_write_eof():
            transport.write_eof()
            self._linger = self._loop.call_later(LINGER_SECONDS, self._close)
        else:
            transport.close()

    def _close(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def _expired(self) -> None:
        if self.refused:
            return
        if self.received:
            self.refuse(
                408,
                f"the request's head did not arrive within {self.limits.timeout:g} s",
                part="header",
                name="*",
            )
        elif self._transport is not None:
            # Nothing was sent at all: close quietly, as uvicorn does an idle keep-alive.
            self.refused = True
            self._transport.close()


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the head limits of its configuration."""

    def __init__(
        self, config: uvicorn.Config, server_state: Any, app_state: dict[str, Any], **kw: Any
    ) -> None:
        super().__init__(config, server_state, app_state, **kw)
        self.guard = HeadGuard(limits_of(config), self.loop, self._responding)
        self.conn = _LimitedConnection(self.guard, h11.SERVER, limits_of(config).max_bytes)

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
        if self.guard.refused:
            self.guard.drop(data)
            return
        if self.conn.their_state is h11.IDLE:
            self.guard.received += len(data)
            self.guard.arm()
        super().data_received(data)


class _LimitedConnection(h11.Connection):
    """h11's connection whose head refusals become the guard's answer (not uvicorn's 400)."""

    def __init__(self, guard: HeadGuard, role: type[h11.SERVER], max_incomplete_event_size: int) -> None:
        super().__init__(role, max_incomplete_event_size=max_incomplete_event_size)
        self._guard = guard

    def next_event(self) -> Any:
        if self._guard.refused:
            return h11.NEED_DATA
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint != 431:
                raise
            self._guard.too_long(url_complete=b"\r\n" in self.trailing_data[0])
            return h11.NEED_DATA
        if isinstance(event, h11.Request):
            self._guard.complete()
            if len(event.target) > self._guard.limits.max_url:
                self._guard.url_too_long()
                return h11.NEED_DATA
            if len(event.headers) > self._guard.limits.max_count:
                self._guard.too_many()
                return h11.NEED_DATA
            # h11 measures a head only while it is incomplete: one that came in a single read
            # is measured here (its request line and header lines, as they were sent).
            size = len(event.target) + LINE_OVERHEAD
            size += sum(len(name) + len(value) + 4 for name, value in event.headers.raw_items())
            if size > self._guard.limits.max_bytes:
                self._guard.too_long(url_complete=True)
                return h11.NEED_DATA
        return event


def protocol_class(http: Literal["h11", "httptools"]) -> type[asyncio.Protocol]:
    """The limited protocol for uvicorn's ``http`` choice."""
    if http == "h11":
        return LimitedH11Protocol
    from cebroker.web.heads_httptools import LimitedHttpToolsProtocol

    return LimitedHttpToolsProtocol
