"""ASGI apps served over real TCP for the tests: uvicorn in a thread, on 127.0.0.1.

:class:`ServerThread` serves one app (a broker, a sink, a proxy) on port 0 of 127.0.0.1 unless
told a port; :class:`ServedApps` keeps several of them, each with a client, for a fixture to
stop at its end.
"""

from __future__ import annotations

import socket
import threading

import httpx
import uvicorn
from starlette.types import ASGIApp

from support.waiting import wait_until

#: Seconds a server has to start, and to stop.
START_TIMEOUT = 20.0


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
        config = uvicorn.Config(app, log_level="warning", lifespan="auto", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self) -> ServerThread:
        """Start serving; returns once the server listens (AssertionError if it cannot)."""
        self._thread.start()
        wait_until(
            lambda: self._server.started or not self._thread.is_alive(),
            START_TIMEOUT,
            f"the server of {self.url} to start",
        )
        if not self._server.started:
            raise AssertionError(f"the server of {self.url} stopped during start-up")
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        # By default do not wait for a deliberately slow request to finish.
        self._server.force_exit = self._force_exit
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
        client = httpx.Client(base_url=server.url, timeout=30)
        self._running.append((server, client))
        return server, client

    def close(self) -> None:
        """Close every client and stop every server."""
        for server, client in reversed(self._running):
            client.close()
            server.stop()
        self._running.clear()
