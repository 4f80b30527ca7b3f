"""The delivery transport (HTTP/1.1 over pooled connections) against a raw socket server scripted
byte by byte: RFC 9112 message body length (Content-Length, chunked coding, close) and
persistence, the pool's caps and kept-alive connections, TLS, plus the delivery policy (body
prefix, no redirects, no cookies, one deadline, no header injection, errors translated)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ceprotocols.http import pool
from ceprotocols.http.connection import HttpConnection
from ceprotocols.http.transport import BODY_KEEP, Failure, HttpTransport, HttpTransportError
from support.tls import self_signed


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
                if reply == b"CLOSE":  # read, then closed unanswered
                    break
                if reply.startswith(b"SLOW "):  # answered 204 after the given seconds
                    await asyncio.sleep(float(reply.split()[1]))
                    reply = b"HTTP/1.1 204 No Content\r\n\r\n"
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
    """Request line with path and query, Host, Content-Length, our headers and nothing that would
    change the event (no default Content-Type, no Accept-Encoding); one connection reused."""
    server, url = raw
    server.replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\n\r\nok"] * 3
    transport = HttpTransport()
    for _ in range(3):
        response = await transport.request("POST", url, {"ce-id": "1"}, b"body", deadline=5)
        assert (response.status, response.body, response.headers["x-a"]) == (200, b"ok", "1")
    await transport.aclose()
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /in?x=1 HTTP/1.1\r\n")
    assert b"Content-Length: 4\r\n" in first
    assert b"ce-id: 1\r\n" in first
    assert b"content-type" not in first.lower()
    assert b"accept-encoding" not in first.lower()
    assert first.endswith(b"\r\n\r\nbody")


async def test_chunked_and_close_delimited_bodies(raw: tuple[RawServer, str]) -> None:
    """RFC 9112 6.3: a chunked body (extensions, trailers) and a body delimited by close."""
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
    """A 100 Continue is skipped; a body over the keep limit is drained, its prefix kept, and
    the connection serves the next request."""
    server, url = raw
    big = b"x" * (BODY_KEEP + 10) + b"y" * (3 * BODY_KEEP)
    server.replies = [
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400 Bad\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big),
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]
    transport = HttpTransport()
    response = await transport.request("POST", url, {}, b"", deadline=5)
    assert response.status == 400
    assert response.body == b"x" * BODY_KEEP
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


async def test_redirects_are_returned_and_cookies_not_kept(raw: tuple[RawServer, str]) -> None:
    """HTTP Webhook spec 2.2: a redirect is the answer, not followed. A Set-Cookie from one
    delivery is not sent with the next (subscriptions to one host share the pool)."""
    server, url = raw
    server.replies = [
        b"HTTP/1.1 307 Moved\r\nLocation: /elsewhere\r\nSet-Cookie: s=1\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]
    transport = HttpTransport()
    response = await transport.request("POST", url, {}, b"", deadline=5)
    assert (response.status, response.headers["location"]) == (307, "/elsewhere")
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await transport.aclose()
    assert len(server.requests) == 2
    assert all(r.startswith(b"POST /in?x=1 ") for r in server.requests)
    assert b"cookie" not in server.requests[1].lower()


@pytest.mark.parametrize(
    "headers", [{"x-a": "v\r\nx-b: injected"}, {"x-a": "v\nx"}, {"x-a\r\nx-b": "v"}, {"x-a": "\x00"}]
)
async def test_header_injection_is_refused(raw: tuple[RawServer, str], headers: dict[str, str]) -> None:
    """RFC 9110 5.5: CR, LF and NUL never reach the wire; the request is not sent at all."""
    server, url = raw
    transport = HttpTransport()
    with pytest.raises(HttpTransportError, match="control character") as info:
        await transport.request("POST", url, headers, b"", deadline=5)
    await transport.aclose()
    assert info.value.failure is Failure.INVALID
    assert server.requests == []


async def test_timeout_malformed_refused_and_bad_urls(raw: tuple[RawServer, str]) -> None:
    """Each failure has its kind: timeout, unreachable (malformed answer, refused connect) or
    invalid (a URL that is not http(s))."""
    server, url = raw
    server.replies = [b"HANG", b"nonsense\r\n\r\n"]
    transport = HttpTransport()
    with pytest.raises(HttpTransportError) as info:
        await transport.request("POST", url, {}, b"", deadline=0.2)
    assert info.value.timeout
    with pytest.raises(HttpTransportError) as info:
        await transport.request("POST", url, {}, b"", deadline=5)
    assert info.value.failure is Failure.UNREACHABLE
    with pytest.raises(HttpTransportError) as info:
        await transport.request("POST", "http://127.0.0.1:9/", {}, b"", deadline=5)
    assert info.value.failure is Failure.UNREACHABLE
    for bad in ("ftp://x/", "http://"):
        with pytest.raises(HttpTransportError, match="not a usable") as info:
            await transport.request("POST", bad, {}, b"", deadline=5)
        assert info.value.failure is Failure.INVALID
    await transport.aclose()


async def test_a_request_on_a_kept_alive_connection_closed_unanswered_goes_again(
    raw: tuple[RawServer, str],
) -> None:
    """The peer closes a kept-alive connection as the next request arrives, answering nothing:
    the request goes once more, on a new connection (the sink saw it twice: at least once)."""
    server, url = raw
    server.replies = [b"HTTP/1.1 204 No Content\r\n\r\n", b"CLOSE"]
    transport = HttpTransport()
    assert (await transport.request("POST", url, {}, b"a", deadline=5)).status == 204
    assert (await transport.request("POST", url, {}, b"b", deadline=5)).status == 204
    await transport.aclose()
    assert server.connections == 2
    assert [r[-1:] for r in server.requests] == [b"a", b"b", b"b"]


async def test_a_new_connection_closed_unanswered_fails_without_a_retry(raw: tuple[RawServer, str]) -> None:
    server, url = raw
    server.replies = [b"CLOSE"]
    transport = HttpTransport()
    with pytest.raises(HttpTransportError, match="closed before the answer") as info:
        await transport.request("POST", url, {}, b"", deadline=5)
    await transport.aclose()
    assert info.value.failure is Failure.UNREACHABLE
    assert len(server.requests) == 1


async def test_the_per_host_cap_makes_a_request_wait_within_its_deadline(raw: tuple[RawServer, str]) -> None:
    """One connection to the origin: a second request waits for it (and reuses it); a third
    whose deadline ends while it waits fails with a timeout and sends nothing."""
    server, url = raw
    server.replies = [b"SLOW 0.3", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]
    transport = HttpTransport(max_per_host=1)
    first = asyncio.create_task(transport.request("POST", url, {}, b"", deadline=5))
    second = asyncio.create_task(transport.request("POST", url, {}, b"", deadline=5))
    third = asyncio.create_task(transport.request("POST", url, {}, b"", deadline=0.1))
    with pytest.raises(HttpTransportError) as info:
        await third
    assert info.value.timeout
    assert ((await first).status, (await second).status) == (204, 200)
    await transport.aclose()
    assert (server.connections, len(server.requests)) == (1, 2)


async def test_a_connection_its_peer_closed_while_idle_frees_its_place(raw: tuple[RawServer, str]) -> None:
    """With a cap of one connection, a connection the peer closed after its answer does not
    keep the next request waiting: the pool forgets it as it closes."""
    server, url = raw
    server.close_after = {0}
    transport = HttpTransport(max_per_host=1, max_connections=1)
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await transport.aclose()
    assert server.connections == 2


async def test_an_idle_connection_past_the_keep_alive_time_is_not_reused(
    raw: tuple[RawServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = raw
    monkeypatch.setattr(pool, "KEEPALIVE", 0.0)  # every idle connection is past it
    transport = HttpTransport()
    for _ in range(2):
        assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await transport.aclose()
    assert server.connections == 2


async def test_user_information_is_sent_as_basic_credentials(raw: tuple[RawServer, str]) -> None:
    """A stored sink URL may still carry user information (docs/security.md): it is sent as
    Basic credentials, unless the request has an Authorization header of its own."""
    server, url = raw
    with_user = url.replace("http://", "http://user:pa%20ss@")
    transport = HttpTransport()
    await transport.request("POST", with_user, {}, b"", deadline=5)
    await transport.request("POST", with_user, {"Authorization": "Bearer t"}, b"", deadline=5)
    await transport.aclose()
    assert b"Authorization: Basic dXNlcjpwYSBzcw==\r\n" in server.requests[0]
    assert b"Authorization: Bearer t\r\n" in server.requests[1]
    assert b"Basic" not in server.requests[1]
    assert server.requests[0].startswith(b"POST /in?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")


@pytest.mark.parametrize("name", ["Content-Length", "transfer-encoding"])
async def test_the_framing_headers_are_the_transports(raw: tuple[RawServer, str], name: str) -> None:
    server, url = raw
    transport = HttpTransport()
    with pytest.raises(HttpTransportError, match="written by the transport") as info:
        await transport.request("POST", url, {name: "3"}, b"abcdef", deadline=5)
    await transport.aclose()
    assert info.value.failure is Failure.INVALID
    assert server.requests == []


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[RawServer, str, Path]]:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = RawServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server, f"https://127.0.0.1:{port}/in", cert


async def test_https_verifies_the_peer_against_the_trust_store(
    tls_server: tuple[RawServer, str, Path],
) -> None:
    """A certificate the trust store vouches for serves requests on one kept-alive connection;
    with the system's trust store, which does not know it, nothing is sent."""
    server, url, cert = tls_server
    trusting = HttpTransport(tls=ssl.create_default_context(cafile=str(cert)))
    for _ in range(2):
        assert (await trusting.request("POST", url, {"ce-id": "1"}, b"x", deadline=5)).status == 204
    await trusting.aclose()
    assert (server.connections, len(server.requests)) == (1, 2)
    default = HttpTransport()
    with pytest.raises(HttpTransportError, match="certificate") as info:
        await default.request("POST", url, {}, b"", deadline=5)
    await default.aclose()
    assert info.value.failure is Failure.UNREACHABLE
    assert len(server.requests) == 2


async def test_an_answer_nobody_asked_for_closes_the_connection(raw: tuple[RawServer, str]) -> None:
    """A second answer in the same read as the first: the first is the request's (its headers
    as they were), and the connection, whose framing can no longer be trusted, is not reused."""
    server, url = raw
    server.replies = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: 1\r\n\r\nok"
        b"HTTP/1.1 500 Extra\r\nX-B: 2\r\nContent-Length: 0\r\n\r\n"
    ]
    transport = HttpTransport()
    first = await transport.request("POST", url, {}, b"", deadline=5)
    assert (first.status, first.body) == (200, b"ok")
    assert dict(first.headers) == {"content-length": "2", "x-a": "1"}
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    await transport.aclose()
    assert server.connections == 2


async def test_head_is_refused() -> None:
    transport = HttpTransport()
    with pytest.raises(HttpTransportError, match="HEAD") as info:
        await transport.request("HEAD", "http://127.0.0.1:9/", {}, b"", deadline=5)
    assert info.value.failure is Failure.INVALID


async def test_a_shorter_deadline_after_a_longer_one_on_the_same_connection_holds(
    raw: tuple[RawServer, str],
) -> None:
    """One timer serves a connection's exchanges: an exchange whose deadline comes before the
    timer's still times out at its own deadline."""
    server, url = raw
    server.replies = [b"HTTP/1.1 204 No Content\r\n\r\n", b"HANG"]
    transport = HttpTransport()
    assert (await transport.request("POST", url, {}, b"", deadline=60)).status == 204
    started = asyncio.get_running_loop().time()
    with pytest.raises(HttpTransportError) as info:
        await transport.request("POST", url, {}, b"", deadline=0.2)
    assert info.value.timeout
    assert asyncio.get_running_loop().time() - started < 5  # not the first exchange's 60 s
    await transport.aclose()
    assert server.connections == 1


async def test_a_connection_the_pool_never_counted_frees_no_place(raw: tuple[RawServer, str]) -> None:
    """A connect cancelled as it completed leaves a connection the pool never counted: when it
    closes, the cap keeps its count (two requests at once with a cap of one still share one
    connection, one after the other)."""
    server, url = raw
    server.replies = [b"SLOW 0.1", b"HTTP/1.1 204 No Content\r\n\r\n"]
    transport = HttpTransport(max_connections=1, max_per_host=0)  # the cap of all origins
    pool = transport._pool
    stray = HttpConnection((False, "127.0.0.1", 1), pool._lost)  # (another origin)
    stray.connection_lost(None)  # as a cancelled connect's transport closes
    first = asyncio.create_task(transport.request("POST", url, {}, b"", deadline=5))
    second = asyncio.create_task(transport.request("POST", url, {}, b"", deadline=5))
    assert ((await first).status, (await second).status) == (204, 204)
    await transport.aclose()
    assert server.connections == 1


async def test_a_connection_closed_after_an_interim_answer_is_not_sent_again(
    raw: tuple[RawServer, str],
) -> None:
    """A 100 Continue shows the peer read the request: a kept-alive connection closed after it
    is a failure of that request, not a stale connection to send it again on."""
    server, url = raw
    server.replies = [b"HTTP/1.1 204 No Content\r\n\r\n", b"HTTP/1.1 100 Continue\r\n\r\n"]
    server.close_after = {1}
    transport = HttpTransport()
    assert (await transport.request("POST", url, {}, b"", deadline=5)).status == 204
    with pytest.raises(HttpTransportError, match="closed before the answer") as info:
        await transport.request("POST", url, {}, b"", deadline=5)
    await transport.aclose()
    assert info.value.failure is Failure.UNREACHABLE
    assert len(server.requests) == 2
