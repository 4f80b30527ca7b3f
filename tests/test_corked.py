"""An answer's head and body leave in one socket write (cebroker.web.corked): a head is held
until the next write or the end of the event loop's turn, the bytes keep their order, and a
streamed answer's head is not held back until its body. Unit tests on a recording transport,
then a real uvicorn server with each of the broker's two HTTP protocols, spoken to over a socket. And
the serving process freezes what its start-up built (cebroker.pipeline.gcpause)."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from cebroker.web.corked import CorkedTransport
from cebroker.web.heads import HeadLimits, LimitedConfig, protocol_class

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"


class Recording:
    """A transport that records its writes (and whether it was closed)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.events.append("write")

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def abort(self) -> None:
        self.closing = True
        self.events.append("abort")

    def write_eof(self) -> None:
        self.events.append("eof")

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> Any:
        return f"extra {name}"


def _corked(loop: asyncio.AbstractEventLoop) -> tuple[CorkedTransport, Recording]:
    inner = Recording()
    return CorkedTransport(cast(asyncio.Transport, inner), loop), inner


async def test_head_and_body_of_one_turn_are_one_write() -> None:
    corked, inner = _corked(asyncio.get_running_loop())
    corked.write(HEAD)
    assert inner.writes == []
    assert corked.get_write_buffer_size() == len(HEAD)
    corked.write(memoryview(b"hello"))
    assert inner.writes == [HEAD + b"hello"]
    await asyncio.sleep(0)  # the turn's end finds nothing held
    assert inner.writes == [HEAD + b"hello"]


async def test_a_head_alone_goes_out_at_the_end_of_the_turn() -> None:
    corked, inner = _corked(asyncio.get_running_loop())
    corked.write(HEAD)
    await asyncio.sleep(0)
    assert inner.writes == [HEAD]
    corked.write(b"hello")  # a later body is written as it comes
    assert inner.writes == [HEAD, b"hello"]


async def test_other_writes_pass_through_and_keep_their_order() -> None:
    corked, inner = _corked(asyncio.get_running_loop())
    corked.write(b"5\r\nhello\r\n")  # a chunk is not a head
    corked.write(b"HTTP/1.1 but no empty line")
    assert inner.writes == [b"5\r\nhello\r\n", b"HTTP/1.1 but no empty line"]
    corked.write(HEAD)
    corked.write(HEAD)  # a head after a head: the first goes out with it, in order
    assert inner.writes[2:] == [HEAD + HEAD]


async def test_close_and_eof_send_a_held_head_first_and_abort_drops_it() -> None:
    loop = asyncio.get_running_loop()
    corked, inner = _corked(loop)
    corked.write(HEAD)
    corked.close()
    assert inner.events == ["write", "close"]
    assert inner.writes == [HEAD]
    corked, inner = _corked(loop)
    corked.write(HEAD)
    corked.write_eof()
    assert inner.events == ["write", "eof"]
    corked, inner = _corked(loop)
    corked.write(HEAD)
    corked.abort()
    await asyncio.sleep(0)
    assert inner.events == ["abort"]
    assert inner.writes == []


async def test_a_head_held_for_a_closing_transport_is_dropped_and_the_rest_delegates() -> None:
    corked, inner = _corked(asyncio.get_running_loop())
    corked.write(HEAD)
    inner.closing = True
    await asyncio.sleep(0)
    assert inner.writes == []
    assert corked.get_extra_info("peername") == "extra peername"
    assert corked.is_closing() is True


# -- a real server --------------------------------------------------------------------------


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/plain":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello"})
        return
    # /stream: the head, then the body only once the client has read the head.
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await asyncio.get_running_loop().run_in_executor(None, HEAD_SEEN.wait, 10)
    await send({"type": "http.response.body", "body": b"late"})


HEAD_SEEN = threading.Event()


@pytest.fixture(params=["httptools", "h11"])
def server(request: pytest.FixtureRequest) -> Iterator[int]:
    HEAD_SEEN.clear()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = LimitedConfig(
        _app,
        head_limits=HeadLimits(max_bytes=8192, max_count=100, max_url=8192, timeout=5.0),
        http=protocol_class(request.param),
        lifespan="off",
        log_level="warning",
    )
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not running.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.started
    try:
        yield sock.getsockname()[1]
    finally:
        running.should_exit = True
        thread.join(10)
        sock.close()


def _read_until(conn: socket.socket, marker: bytes, data: bytes = b"") -> bytes:
    while marker not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def test_answers_are_whole_on_a_kept_alive_connection(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=10) as conn:
        for _ in range(3):
            conn.sendall(b"GET /plain HTTP/1.1\r\nhost: x\r\n\r\n")
            answer = _read_until(conn, b"hello")
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK")
            assert b"content-length: 5" in head
            assert body == b"hello"


def test_a_streamed_head_is_not_held_back_until_its_body(server: int) -> None:
    # The app waits up to 10 s for the head to be read: a head held until the body would make
    # this read time out first.
    with socket.create_connection(("127.0.0.1", server), timeout=5) as conn:
        conn.sendall(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        head = _read_until(conn, b"\r\n\r\n")  # the app sends no body until this arrives
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert b"transfer-encoding: chunked" in head.lower()
        HEAD_SEEN.set()
        rest = _read_until(conn, b"0\r\n\r\n", head.partition(b"\r\n\r\n")[2])
        assert b"late" in rest


# -- the collector's freeze at start-up (cebroker.pipeline.gcpause) ---------------------------


def test_the_serving_process_freezes_what_start_up_built() -> None:
    """And it collects the young generation less often from then on."""
    from cebroker.cli import stopping_server
    from cebroker.pipeline.gcpause import YOUNG_THRESHOLD

    thresholds = gc.get_threshold()
    assert thresholds[0] != YOUNG_THRESHOLD
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = stopping_server(uvicorn.Config(_app, lifespan="off", log_level="warning"), on_stop=[])
    assert gc.get_freeze_count() == 0
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.started
        # Everything alive once the server had started is frozen (the freeze runs right after).
        while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gc.get_freeze_count() > 1000
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *thresholds[1:])
    finally:
        server.should_exit = True
        thread.join(10)
        gc.unfreeze()  # this test's process goes on with other tests
        gc.set_threshold(*thresholds)
        sock.close()
