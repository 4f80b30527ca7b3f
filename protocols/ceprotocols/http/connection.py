"""One HTTP/1.1 client connection: an :class:`asyncio.Protocol` that writes a request and reads
its answer with httptools (the llhttp parser, in C), one exchange at a time.

The answer's length follows RFC 9112 6.3, as llhttp reads it: ``Content-Length``, the chunked
coding (extensions and trailers read and dropped), or the connection's close for an answer
with neither (only such an answer ends at the close: any other one cut short by it fails).
Interim ``1xx`` answers are skipped. At most ``keep`` bytes of the body are kept; the rest is
read and dropped as it arrives, so that the connection can serve the next exchange. Whether it
may is the answer's to say (``Connection: close``, HTTP/1.0 without keep-alive) and the
parser's: a connection whose answer did not parse, or was cut short, is closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import httptools

__all__ = ["Answer", "ConnectionLost", "HttpConnection", "MalformedAnswer"]


class ConnectionLost(ConnectionError):
    """The connection closed before the answer was complete; ``answered`` says whether any of
    the answer had arrived (a kept-alive connection closed by its peer before it read the
    request answers nothing, and the request may go again on a new connection)."""

    def __init__(self, message: str, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


class MalformedAnswer(ConnectionError):
    """The answer is not HTTP/1.x as RFC 9112 has it (llhttp refused it)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What came back: the status, the header fields in order (names in lower case, values
    decoded as UTF-8 with invalid bytes kept as surrogates), at most ``keep`` bytes of the
    body and whether there was more."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    truncated: bool


class HttpConnection(asyncio.Protocol):
    """A client connection to one origin; :meth:`exchange` sends a request and awaits its answer.

    ``origin`` is the pool's key for it, and ``lost`` hears when it closes. :attr:`reusable`
    says whether it may serve another exchange (its last answer was whole and allows it, and it
    is open).
    """

    def __init__(self, origin: tuple[bool, str, int], lost: Callable[[HttpConnection], None]) -> None:
        self.origin = origin
        self._lost = lost
        #: Whether the pool counts it: from the moment its connect returned to the pool (a
        #: connect cancelled as it completed leaves a connection the pool never counted, whose
        #: close must not free a place twice) until it closes (see :mod:`.pool`).
        self.counted = False
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._future: asyncio.Future[Answer] | None = None
        #: One timer for the exchanges one after another (see :meth:`exchange`), and when the
        #: current one expires.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._expires = 0.0
        self.closed = False
        #: Exchanges completed on this connection (a reused one may have been closed by its
        #: peer meanwhile: see :class:`ConnectionLost`).
        self.served = 0
        #: When it was last put back idle (the event loop's clock).
        self.idle_since = 0.0
        self._keep_alive = False
        self._unsolicited = False
        #: Whether any of the current exchange's answers arrived (an interim one counts).
        self._received = False
        self._reset(0)

    def _reset(self, keep: int) -> None:
        self._keep = keep
        self._status = 0
        self._headers: list[tuple[str, str]] = []
        self._parts: list[bytes] = []
        self._kept = 0
        self._truncated = False
        #: Whether the answer's body runs to the close (neither a length nor the chunked coding).
        self._to_close = True
        self._in_body = False

    @property
    def reusable(self) -> bool:
        """Whether the connection may serve another exchange."""
        return self._keep_alive and not self.closed and self._future is None

    def exchange(self, data: bytes, keep: int, expires: float) -> asyncio.Future[Answer]:
        """Write ``data`` (a whole request) and return the future of its answer, which fails
        with :class:`TimeoutError` at ``expires`` (the event loop's clock; the connection is
        then aborted), :class:`ConnectionLost` or :class:`MalformedAnswer`."""
        transport = self.transport
        assert transport is not None
        assert self._future is None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()
        self._future = future
        self._keep_alive = False
        self._received = False
        self._reset(keep)
        # A timer started and cancelled for every exchange cost more than the rest of the
        # exchange's bookkeeping: one timer serves the connection's exchanges one after another,
        # and when it fires it waits on for the exchange under way (if any) or stops.
        self._expires = expires
        if self._timer is None or expires < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_at(expires, self._check)
            self._timer_at = expires
        transport.write(data)
        return future

    def close(self) -> None:
        """Close the connection (an exchange under way fails)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _check(self) -> None:
        self._timer = None
        if self._future is None:
            return  # idle: the next exchange starts the timer again
        loop = asyncio.get_running_loop()
        if loop.time() < self._expires:
            self._timer = loop.call_at(self._expires, self._check)
            self._timer_at = self._expires
            return
        self._fail(TimeoutError())
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        future, self._future = self._future, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if future is not None and not future.done():
            future.set_exception(exc)

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (a stream transport)

    def data_received(self, data: bytes) -> None:
        if self._future is None:
            # Bytes nobody asked for (after an answer, or on an idle connection): the
            # connection can no longer be trusted to frame the next answer.
            self.close()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(MalformedAnswer(f"malformed answer: {exc}"))
            self.close()
            return
        if self._unsolicited:
            self.close()  # more than the answer came: see on_message_begin

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._future is not None:
            if self._in_body and self._to_close:
                self._complete()  # RFC 9112 6.3: the close ends an answer without a length
            else:
                reason = f": {exc}" if exc is not None else ""
                message = f"connection closed before the answer was complete{reason}"
                self._fail(ConnectionLost(message, self._received))
        self._lost(self)

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self._future is None:
            # An answer began after the one asked for was complete (in the same read): the
            # connection is closed once the read is parsed, and its answer keeps what it had.
            self._unsolicited = True
            self._keep_alive = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._unsolicited:
            return
        lowered = name.decode("latin-1").lower()
        if lowered == "content-length" or (lowered == "transfer-encoding" and b"chunked" in value.lower()):
            self._to_close = False
        self._headers.append((lowered, value.decode("utf-8", "surrogateescape")))

    def on_headers_complete(self) -> None:
        if self._unsolicited:
            return
        self._status = self._parser.get_status_code()
        self._in_body = True

    def on_body(self, body: bytes) -> None:
        if self._unsolicited:
            return
        room = self._keep - self._kept
        if room <= 0:
            self._truncated = True
        elif len(body) > room:
            self._parts.append(body[:room])
            self._kept = self._keep
            self._truncated = True
        else:
            self._parts.append(body)
            self._kept += len(body)

    def on_message_complete(self) -> None:
        if self._unsolicited:
            return
        if 100 <= self._status < 200:  # an interim answer: the final one follows
            self._reset(self._keep)
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._complete()

    def _complete(self) -> None:
        future, self._future = self._future, None
        self.served += 1
        if future is not None and not future.done():
            body = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
            future.set_result(Answer(self._status, self._headers, body, self._truncated))
        self._headers, self._parts = [], []  # (the answer keeps its own)
