"""Who runs a paho-mqtt client's network IO: paho's own thread, or the asyncio event loop.

paho can drive its socket from an external event loop (``on_socket_*`` callbacks plus
``loop_read``, ``loop_write`` and ``loop_misc``). :class:`LoopNetwork` does that on the asyncio
loop, so a publish is written by the loop itself and its acknowledgement is handled there: no
thread hop, no wake-up byte per publish and no thread competing with the loop for the GIL, which
is what made the threaded sender slow under load. Only the blocking steps (DNS, TCP connect, TLS
and WebSocket handshakes) run in a worker thread. :class:`ThreadedNetwork` keeps paho's thread
for clients whose message handler may block (a receiver's back pressure).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Callable
from typing import Any, Protocol

import paho.mqtt.client as paho

from ceprotocols.errors import DestinationRefused

#: Reconnect pauses in seconds: the first retry is immediate, then they double up to the last.
RECONNECT_DELAYS = (0.0, 1.0, 2.0, 4.0, 5.0)
_MISC_INTERVAL = 1.0  # paho's keepalive bookkeeping wants loop_misc() about once a second


class Network(Protocol):
    """Runs one client's IO and brings paho's callbacks onto the event loop."""

    def call(self, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback(*args)`` on the event loop (from whatever thread paho called us in)."""
        ...

    def start(self, host: str, port: int, keepalive: int, options: dict[str, Any] | None = None) -> None:
        """Begin connecting (and keep trying); CONNACK arrives through ``on_connect``.
        ``options`` go to paho's ``connect_async`` (``clean_start``, ``properties``)."""
        ...

    def lost(self) -> None:
        """The connection dropped (called on the event loop): arrange a reconnect."""
        ...

    async def stop(self) -> None:
        """Disconnect and stop every IO activity."""
        ...


class ThreadedNetwork:
    """paho's own network thread (``loop_start``), which also reconnects by itself."""

    def __init__(self, client: paho.Client, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop
        client.reconnect_delay_set(min_delay=1, max_delay=int(RECONNECT_DELAYS[-1]))

    def call(self, callback: Callable[..., None], *args: Any) -> None:
        self._loop.call_soon_threadsafe(callback, *args)

    def start(self, host: str, port: int, keepalive: int, options: dict[str, Any] | None = None) -> None:
        self._client.connect_async(host, port, keepalive=keepalive, **(options or {}))
        self._client.loop_start()

    def lost(self) -> None:
        """paho's thread reconnects on its own."""

    async def stop(self) -> None:
        self._client.disconnect()
        await asyncio.to_thread(self._client.loop_stop)


class LoopNetwork:
    """paho's socket registered with the asyncio loop (``add_reader`` / ``add_writer``).

    ``on_refused`` is told when a connect was refused by the network policy
    (:class:`~ceprotocols.mqtt.checked.CheckedClient`); connecting then stops for good.
    """

    def __init__(
        self,
        client: paho.Client,
        loop: asyncio.AbstractEventLoop,
        on_refused: Callable[[DestinationRefused], None] | None = None,
    ) -> None:
        self._client, self._loop = client, loop
        self._on_refused = on_refused
        self._loop_thread = threading.get_ident()
        self._fd: int | None = None
        self._sock: Any = None
        self._connector: asyncio.Task[None] | None = None
        self._misc: asyncio.Task[None] | None = None
        self._stopped = False
        client.on_socket_open = lambda _c, _u, sock: self.call(self._opened, sock)
        client.on_socket_close = lambda _c, _u, _sock: self.call(self._closed)
        client.on_socket_register_write = lambda _c, _u, _sock: self.call(self._want_write, True)
        client.on_socket_unregister_write = lambda _c, _u, _sock: self.call(self._want_write, False)

    def call(self, callback: Callable[..., None], *args: Any) -> None:
        if threading.get_ident() == self._loop_thread:
            callback(*args)
        else:  # the worker thread of a connect
            self._loop.call_soon_threadsafe(callback, *args)

    def start(self, host: str, port: int, keepalive: int, options: dict[str, Any] | None = None) -> None:
        # Stores the target; no IO.
        self._client.connect_async(host, port, keepalive=keepalive, **(options or {}))
        self._connector = self._loop.create_task(self._connect())
        self._misc = self._loop.create_task(self._housekeeping())

    def lost(self) -> None:
        if not self._stopped and (self._connector is None or self._connector.done()):
            self._connector = self._loop.create_task(self._connect())

    async def stop(self) -> None:
        self._stopped = True
        for task in (self._connector, self._misc):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._client.disconnect()  # queues DISCONNECT; writing it makes paho close the socket
        if self._fd is not None:
            self._client.loop_write()
        self._forget_socket()
        leftover = self._client.socket()  # DISCONNECT not fully written: close without it
        if leftover is not None:
            leftover.close()

    # -- connecting ---------------------------------------------------------------------------

    async def _connect(self) -> None:
        for attempt in itertools.count():
            await asyncio.sleep(RECONNECT_DELAYS[min(attempt, len(RECONNECT_DELAYS) - 1)])
            if self._stopped:
                return
            # An OSError (refused, unreachable, failed TLS or WebSocket handshake) means try again;
            # an address the network policy refuses will be refused again: stop.
            try:
                await asyncio.to_thread(self._client.reconnect)
                return
            except DestinationRefused as refusal:
                if self._on_refused is not None:
                    self._on_refused(refusal)
                return
            except OSError:
                continue

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(_MISC_INTERVAL)
            if self._fd is not None:
                self._client.loop_misc()  # keepalive PINGREQ, and a dead peer is noticed

    # -- socket events (event loop) -----------------------------------------------------------

    def _opened(self, sock: Any) -> None:
        self._forget_socket()
        if self._stopped:  # a connect that finished after stop(): nobody will use it
            sock.close()
            return
        self._sock, self._fd = sock, sock.fileno()
        self._loop.add_reader(self._fd, self._readable)

    def _closed(self) -> None:
        self._forget_socket()

    def _want_write(self, wanted: bool) -> None:
        if self._fd is None:
            return
        if wanted:
            self._loop.add_writer(self._fd, self._client.loop_write)
        else:
            self._loop.remove_writer(self._fd)

    def _readable(self) -> None:
        self._client.loop_read()
        # TLS and WebSocket layers may hold decoded bytes the socket will not signal again.
        pending = getattr(self._sock, "pending", None)
        if self._fd is not None and pending is not None and pending():
            self._loop.call_soon(self._readable)

    def _forget_socket(self) -> None:
        if self._fd is not None:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
        self._sock, self._fd = None, None
