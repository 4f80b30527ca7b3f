"""ASGI apps served over real TCP for the tests: uvicorn in a thread, on 127.0.0.1.

:class:`ServerThread` serves one app (a broker, a sink, a proxy) on port 0 of 127.0.0.1 unless
told a port; :class:`ServedApps` keeps several of them, each with a client, for a fixture to
stop at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

import httpx
import uvicorn
from starlette.types import ASGIApp

from cebroker.cli import head_limits
from cebroker.settings import Settings
from cebroker.web.heads import LimitedConfig, protocol_class
from support.waiting import async_wait_until

#: Seconds a server has to start, and to stop.
START_TIMEOUT = 20.0

#: The TLS settings of the clients :class:`ServedApps` makes: httpx's defaults, made once (making
#: them reads the CA bundle, about 20 ms, for every client otherwise; the clients speak plain
#: HTTP to 127.0.0.1 but httpx builds them anyway).
CLIENT_TLS = httpx.create_ssl_context()

#: Seconds uvicorn gives the connections it asks to close before it stops (its own figure).
CLOSE_GRACE = 0.1


class _Server(uvicorn.Server):
    """uvicorn's server, stopped as soon as it is told instead of on its next tick.

    uvicorn looks at ``should_exit`` every 0.1 s and then always sleeps 0.1 s for the connections
    it asked to close: 0.15 s on average for every server a test stops, two servers (a broker
    and its sink) in most tests. This one wakes when :meth:`wake` is called and waits for the
    connections only as long as some are still open (never longer than uvicorn would). What it
    does when it stops is uvicorn's: connections closed, tasks waited for unless
    ``force_exit``, the app's lifespan shutdown unless ``force_exit``.
    """

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._ready.set()  # listening (or failed: then ``started`` stays false)

    async def main_loop(self) -> None:
        self._woken = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), 0.1)

    def wake(self) -> None:
        """Have the main loop look at ``should_exit`` now (from any thread). If the loop has not
        started yet, it looks at ``should_exit`` before it first waits."""
        loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(woken.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        with contextlib.suppress(AssertionError):  # still open after the grace: as uvicorn, go on
            await async_wait_until(
                lambda: not self.server_state.connections, CLOSE_GRACE, "connections to close", interval=0.005
            )
        try:
            await asyncio.wait_for(self._wait_tasks_to_complete(), self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel()
        if not self.force_exit:
            await self.lifespan.shutdown()


def _config(app: ASGIApp) -> uvicorn.Config:
    """How ``app`` is served: a broker's app as ``cebroker serve`` serves it (the broker's
    httptools protocol, with its head limits and the route it serves past the app), any other
    app by uvicorn's defaults."""
    state = getattr(app, "state", None)
    settings = getattr(state, "settings", None)
    if not isinstance(settings, Settings):
        return uvicorn.Config(app, log_level="warning", lifespan="auto", access_log=False)
    return LimitedConfig(
        app,
        head_limits=head_limits(settings),
        direct=getattr(state, "direct", None),
        http=protocol_class("httptools"),
        log_level="warning",
        lifespan="auto",
        access_log=False,
    )


class ServerThread:
    """An ASGI app served by uvicorn in a background thread; ``url`` is its base URL.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`. On stop in-flight
    requests are cut short unless ``force_exit`` is false, in which case stopping waits for
    them (up to the join timeout).
    """

    def __init__(self, app: ASGIApp, *, port: int = 0, force_exit: bool = True) -> None:
        self._force_exit = force_exit
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = _config(app)
        self._settled = threading.Event()  # set once the server listens, or its thread has ended
        self._server = _Server(config, self._settled)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        finally:
            self._settled.set()

    def start(self) -> ServerThread:
        """Start serving; returns once the server listens (AssertionError if it cannot)."""
        self._thread.start()
        if not self._settled.wait(START_TIMEOUT) and not self._server.started:
            raise AssertionError(f"the server of {self.url} did not start within {START_TIMEOUT:g} s")
        if not self._server.started:
            raise AssertionError(f"the server of {self.url} stopped during start-up")
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        # By default do not wait for a deliberately slow request to finish.
        self._server.force_exit = self._force_exit
        self._server.wake()
        self._thread.join(timeout=START_TIMEOUT)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServedApps:
    """Apps served on free ports, each with an HTTP client; ``close`` stops them, newest first."""

    def __init__(self) -> None:
        self._running: list[tuple[ServerThread, httpx.Client]] = []

    def __len__(self) -> int:
        return len(self._running)

    def start(self, app: ASGIApp, *, force_exit: bool = True) -> tuple[ServerThread, httpx.Client]:
        """Serve ``app``; returns its server and a client bound to it."""
        server = ServerThread(app, force_exit=force_exit).start()
        client = httpx.Client(base_url=server.url, timeout=30, verify=CLIENT_TLS)
        self._running.append((server, client))
        return server, client

    def close(self) -> None:
        """Close every client and stop every server."""
        for server, client in reversed(self._running):
            client.close()
            server.stop()
        self._running.clear()
