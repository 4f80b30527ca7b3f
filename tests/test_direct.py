"""The route the broker's httptools protocol serves past the app (cebroker.web.direct): what it
is offered, what it answers, and what goes to the app instead, on a real uvicorn server spoken
to over a socket."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from cebroker.web.direct import BODY_HELD, RawHeaders, Reply
from cebroker.web.heads import HeadLimits, LimitedConfig, protocol_class


@dataclass
class Route:
    """A direct route for ``POST /direct``: takes a body ``take``, answers it at once or when
    the test says; declines a body ``decline`` after taking it; leaves any other alone."""

    method: bytes = b"POST"
    path: bytes = b"/direct"
    offered: list[tuple[dict[bytes, bytes], bytes]] = field(default_factory=list)
    held: list[Reply] = field(default_factory=list)
    hold: bool = False

    def take(self, headers: RawHeaders, body: bytes, reply: Reply) -> bool:
        self.offered.append((dict(headers), body))
        if body == b"decline":
            asyncio.get_running_loop().call_soon(reply.decline)
            return True
        if body == b"same":  # the same headers and body every time (as the broker's answers)
            reply.answer(202, SAME_HEADERS, b"route:same")
            return True
        if not body.startswith(b"take"):
            return False
        if self.hold:
            self.held.append(reply)
            return True
        answer = b"route:" + body
        reply.answer(202, [(b"content-length", str(len(answer)).encode())], answer)
        return True


SAME_HEADERS: RawHeaders = [(b"content-length", b"10")]

#: What the app found of bodies that never ended.
DISCONNECTS: list[bytes] = []


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers ``app:<the body it read>``; 413 at once, unread, to a head with ``x-refuse``;
    records a body cut short by the client in :data:`DISCONNECTS`."""
    if scope["type"] != "http":
        return
    if (b"x-refuse", b"yes") in scope["headers"]:
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            DISCONNECTS.append(body)
            return
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    answer = b"app:" + body
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(answer)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": answer})


@dataclass
class Served:
    port: int
    route: Route
    loop: asyncio.AbstractEventLoop


@pytest.fixture
def served() -> Iterator[Served]:
    yield from _served()


@pytest.fixture
def brief() -> Iterator[Served]:
    """The same server, closing a connection idle for 1 s (uvicorn's default is 5 s)."""
    yield from _served(timeout_keep_alive=1)


def _served(**settings: Any) -> Iterator[Served]:
    route = Route()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = LimitedConfig(
        _app,
        head_limits=HeadLimits(),
        direct=route,
        http=protocol_class("httptools"),
        lifespan="off",
        log_level="warning",
        access_log=False,
        **settings,
    )
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    def run() -> None:
        async def serve() -> None:
            loops.append(asyncio.get_running_loop())
            await server.serve(sockets=[sock])

        asyncio.run(serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    try:
        yield Served(sock.getsockname()[1], route, loops[0])
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _request(body: bytes, *, path: str = "/direct", extra: str = "", version: str = "1.1") -> bytes:
    head = f"POST {path} HTTP/{version}\r\nhost: x\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


class _Answers:
    """The answers of one connection, read in order: one read may carry several (pipelined
    requests are answered back to back)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._data = b""

    def _more(self) -> None:
        chunk = self._conn.recv(65536)
        assert chunk, f"the connection closed after {self._data!r}"
        self._data += chunk

    def next(self) -> tuple[bytes, bytes]:
        """The next whole answer (head, body)."""
        while b"\r\n\r\n" not in self._data:
            self._more()
        head, _, rest = self._data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            self._more()
            head, _, rest = self._data.partition(b"\r\n\r\n")
        self._data = rest[length:]
        return head, rest[:length]

    @property
    def left(self) -> bytes:
        """What was read past the answers taken."""
        return self._data


def _answer(conn: socket.socket) -> tuple[bytes, bytes]:
    """The one whole answer (head, body) ``conn`` has to read now: nothing may follow it."""
    answers = _Answers(conn)
    answer = answers.next()
    assert answers.left == b"", "more than one answer arrived"
    return answer


def _wait_held(served: Served) -> None:
    """Wait until the route holds a request it took (its answer left to the test)."""
    deadline = time.monotonic() + 10
    while not served.route.held and time.monotonic() < deadline:
        time.sleep(0.01)
    assert served.route.held, "the route took no request"


def _closed(conn: socket.socket) -> bool:
    conn.settimeout(10)
    return conn.recv(1) == b""


def test_a_taken_request_is_answered_by_the_route_on_a_kept_alive_connection(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        for n in range(3):
            conn.sendall(_request(f"take {n}".encode(), extra="x-seen: yes\r\n"))
            head, body = _answer(conn)
            assert head.startswith(b"HTTP/1.1 202 Accepted")
            assert body == f"route:take {n}".encode()
            assert b"connection: close" not in head.lower()
    assert [body for _, body in served.route.offered] == [b"take 0", b"take 1", b"take 2"]
    headers = served.route.offered[0][0]
    assert headers[b"x-seen"] == b"yes"  # names lower-cased, values raw
    assert headers[b"content-length"] == b"6"


def _date(head: bytes) -> bytes:
    return next(line for line in head.split(b"\r\n") if line.lower().startswith(b"date:"))


def test_repeated_answers_carry_the_current_date_and_the_connections_close(served: Served) -> None:
    """A connection's answers that repeat are written from the bytes made for the first, until
    the server's date changes or the connection is to close."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"same"))
        first, body = _answer(conn)
        assert body == b"route:same"
        deadline = time.monotonic() + 10
        later = first
        while _date(later) == _date(first) and time.monotonic() < deadline:
            conn.sendall(_request(b"same"))
            later, body = _answer(conn)
            assert body == b"route:same"
            assert later.replace(_date(later), b"") == first.replace(_date(first), b"")
            time.sleep(0.05)
        assert _date(later) != _date(first), "the date header never changed"
        conn.sendall(_request(b"same", extra="connection: close\r\n"))
        closing, body = _answer(conn)
        assert body == b"route:same"
        assert b"connection: close" in closing.lower()
        assert _closed(conn)


def test_an_idle_connection_closes_a_keep_alive_timeout_after_its_last_answer(brief: Served) -> None:
    with socket.create_connection(("127.0.0.1", brief.port), timeout=10) as conn:
        conn.sendall(_request(b"take 1"))
        assert _answer(conn)[1] == b"route:take 1"
        answered = time.monotonic()
        assert _closed(conn)
        idle = time.monotonic() - answered
    assert 0.9 <= idle < 5, idle


def test_a_connection_that_keeps_asking_stays_open_past_the_timeout(brief: Served) -> None:
    """The idle clock starts again at every answer: requests 0.4 s apart for 2.4 s (the
    timeout is 1 s) are all answered on one connection, which then closes once idle."""
    with socket.create_connection(("127.0.0.1", brief.port), timeout=10) as conn:
        started = time.monotonic()
        for n in range(7):
            conn.sendall(_request(f"take {n}".encode()))
            assert _answer(conn)[1] == f"route:take {n}".encode()
            time.sleep(0.4)
        assert time.monotonic() - started > 2.4
        conn.sendall(_request(b"same"))  # the app and the route answer alike here
        assert _answer(conn)[1] == b"route:same"
        assert _closed(conn)


def test_a_request_left_alone_goes_to_the_app_with_its_body(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"other"))
        head, body = _answer(conn)
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b"app:other"
        conn.sendall(_request(b"take it"))  # the same connection serves the next one directly
        assert _answer(conn)[1] == b"route:take it"


def test_a_request_declined_after_it_was_taken_is_served_by_the_app(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"decline"))
        head, body = _answer(conn)
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b"app:decline"
    assert [body for _, body in served.route.offered] == [b"decline"]


@pytest.mark.parametrize(
    "request_bytes",
    [
        _request(b"take", path="/direct?x=1"),  # the target with a query is another target
        _request(b"take", path="/other"),
        b"PUT /direct HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\ntake",
    ],
    ids=["query", "path", "method"],
)
def test_other_targets_and_methods_are_not_offered(served: Served, request_bytes: bytes) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(request_bytes)
        assert _answer(conn)[1] == b"app:take"
    assert served.route.offered == []


def test_a_body_larger_than_held_streams_to_the_app(served: Served) -> None:
    # The server stops reading past 64 KiB until the app reads: held back, this would hang.
    big = b"take" + b"x" * (BODY_HELD * 3)
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(big))
        head, body = _answer(conn)
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert body == b"app:" + big
    assert served.route.offered == []


def test_a_declared_length_over_held_goes_to_the_app_at_once(served: Served) -> None:
    # The app refuses by the head alone: held until a body that never comes, it never would.
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        head = f"POST /direct HTTP/1.1\r\nhost: x\r\ncontent-length: {BODY_HELD + 1}\r\nx-refuse: yes\r\n\r\n"
        conn.sendall(head.encode() + b"take")
        answer = conn.recv(4096)
        assert answer.startswith(b"HTTP/1.1 413 ")
    assert served.route.offered == []


def test_a_body_cut_short_by_the_client_reaches_the_app_as_incomplete(served: Served) -> None:
    DISCONNECTS.clear()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(b"POST /direct HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\ntake half")
    deadline = time.monotonic() + 10
    while not DISCONNECTS and time.monotonic() < deadline:
        time.sleep(0.01)
    # (What it read before: nothing, since uvicorn answers a read after the loss with the loss.)
    assert len(DISCONNECTS) == 1
    assert served.route.offered == []


def test_expect_100_continue_goes_to_the_app(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(
            _request(b"", extra="expect: 100-continue\r\n").replace(
                b"content-length: 0", b"content-length: 4"
            )
        )
        interim = conn.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 Continue")
        conn.sendall(b"take")
        assert _answer(conn)[1] == b"app:take"
    assert served.route.offered == []


def test_the_connection_closes_after_the_answer_when_it_is_not_kept_alive(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"take", extra="connection: close\r\n"))
        head, body = _answer(conn)
        assert body == b"route:take"
        assert b"connection: close" in head.lower()
        assert _closed(conn)
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"take", version="1.0"))
        head, body = _answer(conn)
        assert body == b"route:take"
        assert _closed(conn)


def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    served.route.hold = True
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"take first") + _request(b"second"))
        _wait_held(served)
        assert len(served.route.held) == 1
        # The second waits behind the first, which is not answered yet.
        reply = served.route.held[0]
        served.loop.call_soon_threadsafe(reply.answer, 202, [(b"content-length", b"5")], b"first")
        answers = _Answers(conn)  # the second's answer may come in the same read as the first's
        assert answers.next()[1] == b"first"
        assert answers.next()[1] == b"app:second"
        assert answers.left == b""


def test_an_answer_to_a_client_gone_is_dropped_and_the_server_serves_on(served: Served) -> None:
    served.route.hold = True
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"take"))
        _wait_held(served)
    reply = served.route.held[0]
    time.sleep(0.1)  # not a negative assertion: the server must see the close before the answer
    served.loop.call_soon_threadsafe(reply.answer, 202, [(b"content-length", b"2")], b"ok")
    served.route.hold = False
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"take again"))
        assert _answer(conn)[1] == b"route:take again"


def test_a_reply_is_used_once(served: Served) -> None:
    served.route.hold = True
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(_request(b"take"))
        _wait_held(served)
        reply = served.route.held[0]
        outcome: list[BaseException | None] = []
        tried = threading.Event()

        def twice() -> None:
            reply.answer(202, [(b"content-length", b"2")], b"ok")
            try:
                reply.decline()
            except RuntimeError as exc:
                outcome.append(exc)
            else:
                outcome.append(None)
            tried.set()

        served.loop.call_soon_threadsafe(twice)
        assert _answer(conn)[1] == b"ok"
    assert tried.wait(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], RuntimeError)
