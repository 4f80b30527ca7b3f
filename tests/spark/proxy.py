"""A proxy in front of the broker that refuses with 503 and ``Retry-After`` for a while, as a
broker under backpressure does: the Spark sink's retries are tested against it (served like
every test app, by :class:`support.servers.ServerThread`)."""

from __future__ import annotations

import json
import threading
import time

import httpx
from starlette.types import Receive, Scope, Send


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(send: Send, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    """Answer the lifespan protocol; returns when the server shuts down."""
    message = await receive()
    if message["type"] == "lifespan.startup":
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
    await send({"type": "lifespan.shutdown.complete"})


class RefusingProxy:
    """Forwards ``POST /events`` batches to the broker, except while refusing: then it answers 503 with
    ``Retry-After`` like a broker under backpressure. ``refuse_after(n, seconds)`` forwards ``n``
    more requests, then refuses every request for ``seconds`` seconds."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.forwarded = 0
        self.forwarded_events = 0
        self.refused = 0
        self._forward_budget: int | None = None
        self._refuse_for = 0.0
        self._refusing_until: float | None = None
        self._lock = threading.Lock()
        self._http: httpx.AsyncClient | None = None

    def refuse_after(self, requests: int, seconds: float) -> None:
        """Forward ``requests`` more requests, then refuse for ``seconds``."""
        with self._lock:
            self._forward_budget = requests
            self._refuse_for = seconds
            self._refusing_until = None

    def _refusing(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if self._refusing_until is not None:
                if now < self._refusing_until:
                    self.refused += 1
                    return True
                self._refusing_until = None
                self._forward_budget = None
            if self._forward_budget is not None:
                if self._forward_budget == 0:
                    self._refusing_until = now + self._refuse_for
                    self.refused += 1
                    return True
                self._forward_budget -= 1
            self.forwarded += 1
            return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            if self._http is not None:
                await self._http.aclose()
            return
        body = await _body(receive)
        if self._refusing():
            await _answer(
                send, 503, b'{"status":503}', {"Retry-After": "1", "Content-Type": "application/json"}
            )
            return
        with self._lock:
            self.forwarded_events += len(json.loads(body))
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=30)
        headers = {
            k.decode(): v.decode()
            for k, v in scope["headers"]
            if k.lower() in (b"content-type", b"authorization")
        }
        response = await self._http.post(f"{self.target}{scope['path']}", content=body, headers=headers)
        await _answer(
            send,
            response.status_code,
            response.content,
            {"Content-Type": response.headers.get("content-type", "")},
        )
