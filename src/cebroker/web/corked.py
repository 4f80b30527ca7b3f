"""A response's head and body in one socket write.

uvicorn writes an answer's head when the application sends ``http.response.start`` and its body
on ``http.response.body``: two ``send()`` system calls per answer, and on a local connection each
one also runs the peer's TCP receive path in the sender's time. They were the largest single
item of a single event's CPU time in the server's process (a fifth of the event loop's, measured
with ``perf``). :class:`CorkedTransport` holds a head back until the next write, which the body
normally is (the application sends it right after, in the same step of its task), and sends the
two together; a head with nothing after it in the same turn of the event loop goes out on its
own at the end of that turn (a streamed answer, whose body comes later), so nothing waits longer
than the turn it was written in. The order of the bytes never changes.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: How a response head begins (``HTTP/1.1 200 OK``) and ends (the empty line).
_HEAD_START = b"HTTP/"
_HEAD_END = b"\r\n\r\n"


class CorkedTransport:
    """A stream transport that joins a response head with the write that follows it.

    Everything else is the wrapped transport's (attributes are looked up on it).
    """

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data``, after a held head; hold ``data`` itself if it is a head."""
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
            return
        if data[:5] == _HEAD_START and data[-4:] == _HEAD_END:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Send a held head now (the end of the event loop's turn, or before closing)."""
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
