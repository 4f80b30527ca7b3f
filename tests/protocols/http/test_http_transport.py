"""The lean HTTP/1.1 delivery transport against a raw socket server scripted byte by byte
(RFC 9112: message body length by Content-Length, chunked coding or close; persistence)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from ceprotocols.http.transport import BODY_KEEP, HttpTransport, HttpTransportError


class RawServer:
    """Answers each request with the bytes ``replies[n]`` (n counts requests across connections)."""

    def __init__(self) -> None:
        self.replies: list[bytes] = []
        self.requests: list[bytes] = []
        self.connections = 0
        self.close_after: set[int] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                index = len(self.requests)
                self.requests.append(head + body)
                reply = (
                    self.replies[index] if index < len(self.replies) else b"HTTP/1.1 204 No Content\r\n\r\n"
                )
                if reply == b"HANG":
                    await asyncio.sleep(10)
                writer.write(reply)
                await writer.drain()
                if index in self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def raw() -> AsyncIterator[tuple[RawServer, str]]:
    server = RawServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server, f"http://127.0.0.1:{port}/in?x=1"


async def test_request_shape_and_keep_alive(raw: tuple[RawServer, str]) -> None:
    """Request line with path and query, Host, Content-Length, headers; one connection reused."""
    server, url = raw
    server.replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\nok"] * 3
    transport = HttpTransport()
    for _ in range(3):
        response = await transport.request("POST", url, {"ce-id": "1"}, b"body", deadline=5)
        assert (response.status, response.body, response.headers["x-a"]) == (200, b"ok", "1, 2")
    await transport.aclose()
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /in?x=1 HTTP/1.1\r\n")
    assert b"Content-Length: 4\r\n" in first
    assert b"ce-id: 1\r\n" in first
    assert first.endswith(b"\r\n\r\nbody")


async def test_chunked_and_close_delimited_bodies(raw: tuple[RawServer, str]) -> None:
    server, url = raw
    server.replies = [
        b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4\r\nfail\r\n3;x=y\r\ned!\r\n0\r\nT: 1\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\nuntil close",
    ]
    server.close_after = {1}
    transport = HttpTransport()
    first = await transport.request("POST", url, {}, b"", deadline=5)
    assert (first.status, first.body) == (500, b"failed!")
    second = await transport.request("POST", url, {}, b"", deadline=5)
    assert (second.status, second.body) == (200, b"until close")
    await transport.aclose()


async def test_interim_response_and_large_body_are_handled(raw: tuple[RawServer, str]) -> None:
    """A 100 Continue is skipped; a body over the keep limit is drained, its prefix kept."""
    server, url = raw
    big = b"x" * (BODY_KEEP + 10)
    server.replies = [
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big),
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]
    transport = HttpTransport()
    response = await transport.request("POST", url, {}, b"", deadline=5)
    assert response.status == 400
    assert len(response.body) == BODY_KEEP
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await transport.aclose()
    assert server.connections == 1


async def test_stale_keep_alive_connection_is_replaced(raw: tuple[RawServer, str]) -> None:
    """The peer closes an idle kept-alive connection: the next request goes on a new one."""
    server, url = raw
    server.close_after = {0}  # answers as keep-alive, then closes
    transport = HttpTransport()
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await asyncio.sleep(0.05)
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await transport.aclose()
    assert server.connections == 2


async def test_timeout_malformed_and_refused(raw: tuple[RawServer, str]) -> None:
    server, url = raw
    server.replies = [b"HANG", b"nonsense\r\n\r\n"]
    transport = HttpTransport()
    with pytest.raises(HttpTransportError) as info:
        await transport.request("POST", url, {}, b"", deadline=0.2)
    assert info.value.timeout
    with pytest.raises(HttpTransportError, match="status line") as info:
        await transport.request("POST", url, {}, b"", deadline=5)
    assert not info.value.timeout
    with pytest.raises(HttpTransportError):
        await transport.request("POST", "http://127.0.0.1:9/", {}, b"", deadline=5)
    with pytest.raises(HttpTransportError, match="not an http"):
        await transport.request("POST", "ftp://x/", {}, b"", deadline=5)
    with pytest.raises(HttpTransportError, match="encodable"):
        await transport.request("POST", url, {"x": "€"}, b"", deadline=5)
    await transport.aclose()
