"""Real HTTP servers for the pipeline tests: a recording sink, a token endpoint and the broker.

Each runs uvicorn in a thread on a socket bound to port 0 of 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send


class ServerThread:
    """An ASGI app served by uvicorn in a background thread; ``url`` once started.

    On exit in-flight requests are cut short unless ``force_exit`` is false, in which case
    stopping waits for them (up to the join timeout).
    """

    def __init__(self, app: ASGIApp, *, force_exit: bool = True) -> None:
        self._force_exit = force_exit
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="auto", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        # By default do not wait for a deliberately slow request to finish.
        self._server.force_exit = self._force_exit
        self._thread.join(timeout=20)
        self._sock.close()


class ServedApps:
    """Apps served on free ports, each with an HTTP client; ``close`` stops them, newest first."""

    def __init__(self) -> None:
        self._running: list[tuple[ServerThread, httpx.Client]] = []

    def __len__(self) -> int:
        return len(self._running)

    def start(self, app: ASGIApp) -> tuple[ServerThread, httpx.Client]:
        """Serve ``app``; returns its server and a client bound to it."""
        server = ServerThread(app).__enter__()
        client = httpx.Client(base_url=server.url, timeout=30)
        self._running.append((server, client))
        return server, client

    def close(self) -> None:
        """Close every client and stop every server."""
        for server, client in reversed(self._running):
            client.close()
            server.__exit__(None, None, None)


@dataclass
class Received:
    """One request a sink got."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: The client's (host, port): the same port means the same connection.
    peer: tuple[str, int] | None = None
    #: When it arrived (monotonic seconds).
    at: float = field(default_factory=time.monotonic)


@dataclass
class Reply:
    """How a sink answers one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


class Sink:
    """Records every request; answers from per-path scripts (then 200), and grants the webhook
    handshake unless told otherwise."""

    def __init__(self) -> None:
        #: Base URL, set once the sink's server is listening.
        self.url = ""
        self.received: list[Received] = []
        self.options: list[Received] = []
        self.scripts: dict[str, list[Reply]] = {}
        self.default: dict[str, Reply] = {}
        self.grant: dict[str, dict[str, str]] = {}
        self.responder: Callable[[Received], Reply | None] | None = None
        #: Requests being answered right now, and the most ever at once.
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        client = scope.get("client")
        peer = (str(client[0]), int(client[1])) if client else None
        got = Received(request.method, request.url.path, dict(request.headers), await request.body(), peer)
        if got.method == "OPTIONS":
            with self._lock:
                self.options.append(got)
            headers = self.grant.get(
                got.path, {"WebHook-Allowed-Origin": got.headers.get("webhook-request-origin", "")}
            )
            await Response(status_code=200, headers=headers)(scope, receive, send)
            return
        reply = self.responder(got) if self.responder else None
        with self._lock:
            if reply is None:
                script = self.scripts.get(got.path)
                reply = script.pop(0) if script else self.default.get(got.path, Reply())
            self.received.append(got)
        with self._lock:
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)
        finally:
            with self._lock:
                self.inflight -= 1
        await Response(reply.body, status_code=reply.status, headers=reply.headers)(scope, receive, send)

    def at(self, path: str) -> list[Received]:
        """Requests received on ``path`` (not OPTIONS)."""
        with self._lock:
            return [r for r in self.received if r.path == path]

    def wait(self, path: str, count: int, timeout: float = 15.0) -> list[Received]:
        """Block until ``path`` has received at least ``count`` requests."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.at(path)
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise AssertionError(f"{path} received {len(self.at(path))} requests, expected {count}")


def wait_until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@contextmanager
def served_sink() -> Iterator[Sink]:
    """A recording sink served on a free port, with its ``url`` set, for the block's duration."""
    recorder = Sink()
    with ServerThread(recorder) as server:
        recorder.url = server.url
        yield recorder
