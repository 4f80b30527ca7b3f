"""Recording HTTP sinks: what a subscriber's endpoint got, and how it answered.

A :class:`Sink` is an ASGI app that records every request and answers from per-path scripts
(status sequences, headers such as ``Retry-After``, delays), grants the webhook validation
handshake unless told otherwise, and can hold requests until released. :func:`served_sink`
serves one on a free port of 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from support.servers import ServerThread
from support.waiting import wait_for


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
    #: The request's query string (without ``?``).
    query: str = ""


@dataclass
class Reply:
    """How a sink answers one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


class Sink:
    """Records every request; answers from per-path scripts (then 200), and grants the webhook
    handshake unless told otherwise.

    Attributes:
        url: base URL, set once the sink's server is listening.
        received: every request but OPTIONS, in order of arrival.
        options: the OPTIONS requests (webhook validation handshakes).
        scripts: per path, the replies to give next (each used once, in order).
        default: per path, the reply once its script is used up (else 200).
        grant: per path, the headers of the handshake's answer (else the origin is allowed).
        responder: when set, answers first; ``None`` from it falls back to the scripts.
        inflight: requests being answered right now; ``max_inflight`` the most ever at once.
    """

    def __init__(self) -> None:
        self.url = ""
        self.received: list[Received] = []
        self.options: list[Received] = []
        self.scripts: dict[str, list[Reply]] = {}
        self.default: dict[str, Reply] = {}
        self.grant: dict[str, dict[str, str]] = {}
        self.responder: Callable[[Received], Reply | None] | None = None
        self.inflight = 0
        self.max_inflight = 0
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        client = scope.get("client")
        peer = (str(client[0]), int(client[1])) if client else None
        got = Received(
            request.method,
            request.url.path,
            dict(request.headers),
            await request.body(),
            peer,
            query=request.url.query,
        )
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
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if not self._open.is_set():
                await asyncio.to_thread(self._open.wait)
            if reply.delay:
                await asyncio.sleep(reply.delay)
        finally:
            with self._lock:
                self.inflight -= 1
        await Response(reply.body, status_code=reply.status, headers=reply.headers)(scope, receive, send)

    def hold(self) -> None:
        """Keep every request from now on unanswered (recorded, though) until :meth:`release`."""
        self._open.clear()

    def release(self) -> None:
        """Answer the requests being held, and every later one at once."""
        self._open.set()

    def at(self, path: str) -> list[Received]:
        """Requests received on ``path`` (not OPTIONS)."""
        with self._lock:
            return [r for r in self.received if r.path == path]

    def ids(self, path: str) -> list[str]:
        """The ``ce-id`` headers of the requests received on ``path`` (binary mode), in order."""
        return [r.headers["ce-id"] for r in self.at(path)]

    def events(self, path: str) -> list[dict[str, Any]]:
        """The structured-mode events received on ``path``, in order."""
        return [dict(json.loads(r.body)) for r in self.at(path)]

    def wait(self, path: str, count: int, timeout: float = 15.0) -> list[Received]:
        """Block until ``path`` has received at least ``count`` requests; returns them all."""
        return wait_for(
            lambda: self.at(path),
            lambda got: len(got) >= count,
            timeout,
            f"{count} requests on {path}",
        )


@contextmanager
def served_sink() -> Iterator[Sink]:
    """A recording sink served on a free port, with its ``url`` set, for the block's duration
    (requests it holds are released at the end)."""
    recorder = Sink()
    with ServerThread(recorder) as server:
        recorder.url = server.url
        try:
            yield recorder
        finally:
            recorder.release()
