"""proton's AMQP 1.0 engine driven by asyncio: a socket's bytes in and out of a proton
``Transport``, on the event loop's thread.

proton's protocol engine (``Connection``, ``Transport``, links and deliveries) does no IO of its
own: bytes read from the socket are pushed into the transport, which updates the connection's
state (links attached, deliveries settled...), and the frames it has to write are taken from it.
proton's reactor (``Container``, ``BlockingConnection``) runs that loop in Python with an event
per state change, each wrapped and dispatched through handler chains; here the event loop does
the IO and the owner of the stream looks at the state it cares about after each read
(``on_input``), so nothing per message is dispatched. SASL and TLS stay proton's (layers of its
transport); the socket is plain TCP either way.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import cast

from proton import (
    SASL,
    SSL,
    Connection,
    Endpoint,
    ProtonException,
    SSLDomain,
    SSLUnavailable,
    Transport,
)

from ceprotocols.credentials import Credential, Plain


class StreamClosed(Exception):
    """The AMQP connection ended; the message says why (a peer's condition, a socket error)."""


class ProtonStream(asyncio.Protocol):
    """One AMQP connection: proton's engine on one TCP connection, driven by the event loop.

    Args:
        host: the name announced in the ``open`` frame and checked by TLS (``amqps``).
        on_input: called on the event loop after each read has been pushed into the engine.
        on_lost: called once when the connection ends, with the reason.
    """

    def __init__(
        self,
        *,
        tls: bool,
        host: str,
        credential: Credential | None,
        on_input: Callable[[], None],
        on_lost: Callable[[StreamClosed], None],
    ) -> None:
        self.connection = Connection()
        self.connection.container = str(uuid.uuid4())
        self.connection.hostname = host
        self.transport = Transport()
        sasl: SASL = self.transport.sasl()
        sasl.allow_insecure_mechs = (
            True  # (as proton's own client: PLAIN over plain TCP is the user's choice)
        )
        if isinstance(credential, Plain):
            self.connection.user = credential.identifier
            self.connection.password = credential.secret
            sasl.allowed_mechs("PLAIN")
        self.transport.bind(self.connection)
        if tls:
            try:
                SSL(self.transport, SSLDomain(SSLDomain.MODE_CLIENT)).peer_hostname = host
            except SSLUnavailable as exc:
                raise StreamClosed(f"amqps: no TLS support in proton: {exc}") from exc
        self._on_input = on_input
        self._on_lost = on_lost
        self._io: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._flush_due = False
        self._tick: asyncio.TimerHandle | None = None
        self.closed: StreamClosed | None = None
        self.session = self.connection.session()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport (uvloop's does not subclass asyncio's classes).
        self._io = cast(asyncio.Transport, transport)
        self.connection.open()
        self.session.open()
        self.flush()

    def data_received(self, data: bytes) -> None:
        if self.closed is not None:
            return
        transport = self.transport
        failure: StreamClosed | None = None
        try:
            while data:
                room = transport.capacity()
                if room <= 0:
                    # The engine takes no more input: it has closed its side (an error it found
                    # or the end of the connection).
                    failure = self._reason("the AMQP engine stopped reading")
                    break
                transport.push(data[:room])
                data = data[room:]
        except ProtonException as exc:
            failure = self._reason(f"AMQP protocol error: {exc}")
        # What was read counts even when the connection ends with it (the outcomes of the
        # messages settled before a peer's close, in the same read).
        self._on_input()
        if failure is None and self.connection.state & Endpoint.REMOTE_CLOSED:
            failure = self._reason("the peer closed the AMQP connection")
        if failure is not None:
            self._end(failure)
            return
        self.flush()
        if self._tick is None:
            self._ticked()

    def eof_received(self) -> bool | None:
        self._end(self._reason("the peer closed the connection"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._io = None
        self._end(self._reason(f"connection lost: {exc}" if exc else "connection closed"))

    # Output

    def flush_soon(self) -> None:
        """Write the engine's output once the current turn of the event loop is over, so that
        the messages sent in one turn go out in one write."""
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what the engine has to send now."""
        self._flush_due = False
        io = self._io
        if io is None or self.closed is not None:
            return
        transport = self.transport
        try:
            pending = transport.pending()
        except ProtonException as exc:
            self._end(self._reason(f"AMQP protocol error: {exc}"))
            return
        if pending > 0:
            output = transport.peek(pending)
            transport.pop(pending)
            if output:
                io.write(output)
        elif pending < 0:  # the engine has written its last frame (it closed the connection)
            self._end(self._reason("the AMQP engine closed the connection"))

    def _ticked(self) -> None:
        """The engine's timers (the idle frames the peer's ``idle-time-out`` asks for): run
        them, then again at the deadline they name."""
        self._tick = None
        if self.closed is not None:
            return
        deadline = self.transport.tick(self._loop.time())
        self.flush()
        if deadline > 0:
            self._tick = self._loop.call_at(deadline, self._ticked)

    # Ending

    def _reason(self, what: str) -> StreamClosed:
        condition = self.transport.condition or self.connection.remote_condition
        if condition is not None:
            return StreamClosed(f"{what}: {condition.name}: {condition.description}")
        return StreamClosed(what)

    def _end(self, reason: StreamClosed) -> None:
        if self.closed is not None:
            return
        self.closed = reason
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._io is not None:
            self._io.abort()
            self._io = None
        self._on_lost(reason)

    def close(self) -> None:
        """Send the ``close`` frame and end the connection (what is still unsettled fails)."""
        if self.closed is not None:
            return
        io = self._io
        self.connection.close()
        if io is not None:
            try:
                pending = self.transport.pending()
                if pending > 0:
                    io.write(self.transport.peek(pending) or b"")
            except ProtonException:
                pass  # (closing: nothing more can be written)
            io.close()  # after the buffered close frame
            self._io = None
        self._end(StreamClosed("connection closed"))
