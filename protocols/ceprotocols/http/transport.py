"""The HTTP client of push delivery: HTTP/1.1 over kept-alive connections, pooled by origin.

One transport per sender, with one :class:`~.pool.Pool` shared by every subscription: kept-alive
connections per origin, ``limit``/``limit_per_host`` caps, TLS for ``https``. httptools (the
llhttp parser, in C) reads answers (``Content-Length``, ``chunked`` or close-delimited bodies,
interim ``1xx``: :mod:`.connection`), and requests are written by :mod:`.wire`, which refuses a
header that would inject a line break. The client is built on the parser rather than on a
general-purpose client library because an exchange is most of what a delivery costs: aiohttp's
session spent about four times this client's CPU on the same exchange (docs/performance.md,
"HTTP delivery"). What this module adds is the delivery policy:

* redirects are never followed (HTTP 1.1 Web Hooks for Event Delivery, section 2.2): a
  redirect is the answer;
* one total timeout per exchange (pool wait, connect, request and the whole response);
* the response body is read up to :data:`BODY_KEEP` bytes (a prefix for dead letters), the rest
  is read and dropped as it arrives so the connection can be reused without buffering it;
* no cookies are kept (two subscriptions to the same host must not share state), no proxy is
  taken from the environment, and nothing asks for a compressed answer;
* a request sent on a kept-alive connection that its peer closed before answering anything
  (it closed the idle connection as the request went out) is sent once more, on a new
  connection; any other failure is the caller's to retry;
* every failure becomes :class:`HttpTransportError` with a :class:`Failure` kind, never with a
  URL's user information in its message; :func:`delivery_error` turns that into the
  ceprotocols error.

Deliveries, webhook validation handshakes and token refreshes all use the same pool, so a
:class:`~ceprotocols.egress.ConnectGuard` given to the transport checks every one of them:
each new connection goes to the addresses the guard accepted for its host (names and IP
literals alike), before anything is sent. A refused address fails with
:attr:`Failure.REFUSED`, and no connection is opened.
"""

from __future__ import annotations

import asyncio
import enum
import ssl
from collections.abc import Mapping

from multidict import CIMultiDict, CIMultiDictProxy

from ceprotocols.egress import ConnectGuard
from ceprotocols.endpoint import redact_text
from ceprotocols.errors import (
    DeliveryError,
    DeliveryRejected,
    DeliveryTimeout,
    DestinationRefused,
    TargetUnreachable,
)
from ceprotocols.http.connection import Answer, ConnectionLost, HttpConnection, MalformedAnswer
from ceprotocols.http.pool import Origin, Pool
from ceprotocols.http.wire import RequestError, Target, request_head, target_of

#: Response body bytes kept (the rest is read and dropped; dead letters keep a prefix only).
BODY_KEEP = 64 * 1024
#: Sink URLs whose target is kept parsed (a bound on the memory they take).
_TARGETS_KEPT = 4096


class Failure(enum.Enum):
    """Why an exchange failed, which decides what the caller does next."""

    #: No complete answer within the deadline.
    TIMEOUT = "timeout"
    #: Connect, TLS, connection lost or a malformed response: a later attempt may work.
    UNREACHABLE = "unreachable"
    #: The request itself cannot be sent (bad URL, a header with a control character): retrying
    #: the same request can never work.
    INVALID = "invalid"
    #: The network policy refuses the host's address: nothing was sent, and nothing will be.
    REFUSED = "refused"


class HttpTransportError(Exception):
    """The exchange failed; ``failure`` says how. The message quotes the URL and the cause,
    but never a URL's user information (it is stored and logged with the delivery)."""

    def __init__(self, message: str, failure: Failure) -> None:
        super().__init__(redact_text(message))
        self.failure = failure

    @property
    def timeout(self) -> bool:
        """Whether the exchange timed out."""
        return self.failure is Failure.TIMEOUT


class HttpResponse:
    """Status, headers (case-insensitive names; the first of repeated fields for ``[]`` and
    ``get``) and at most :data:`BODY_KEEP` bytes of body; ``truncated`` when the body was
    longer than the bytes kept (the rest was read and dropped)."""

    __slots__ = ("_fields", "_headers", "body", "status", "truncated")

    def __init__(
        self, status: int, fields: list[tuple[str, str]], body: bytes, truncated: bool = False
    ) -> None:
        self.status = status
        self._fields = fields
        self._headers: CIMultiDictProxy[str] | None = None
        self.body = body
        self.truncated = truncated

    @property
    def headers(self) -> Mapping[str, str]:
        """The answer's header fields (made when first asked for: most answers need none)."""
        if self._headers is None:
            self._headers = CIMultiDictProxy(CIMultiDict(self._fields))
        return self._headers

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", "replace")


class HttpTransport:
    """Sends requests over pooled connections (see the module).

    Args:
        max_connections: connections open at once, all origins together (0: no cap).
        max_per_host: connections open at once to one origin (0: no cap). A request beyond
            either cap waits for a free connection, and that wait counts against its deadline:
            a cap shared by several callers lets the ones whose servers hang take every
            connection from the others, so a caller that bounds its own requests may want none.
        guard: checks every host connected to against a network policy; ``None`` (or an
            unrestricted guard) checks nothing.
        tls: the TLS context of ``https`` connections (None: the system's trust store and
            the usual checks, :func:`ssl.create_default_context`).
    """

    def __init__(
        self,
        *,
        max_connections: int = 1024,
        max_per_host: int = 256,
        guard: ConnectGuard | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._pool = Pool(
            limit=max_connections,
            per_host=max_per_host,
            guard=guard if guard is not None and guard.restricted else None,
            tls=tls,
        )
        # Each sink URL is parsed once: its target and its pool's key.
        self._targets: dict[str, tuple[Target, Origin]] = {}

    def _target(self, url: str) -> tuple[Target, Origin]:
        found = self._targets.get(url)
        if found is None:
            try:
                target = target_of(url)
            except RequestError as exc:
                raise HttpTransportError(str(exc), Failure.INVALID) from None
            found = (target, (target.tls, target.host, target.port))
            if len(self._targets) >= _TARGETS_KEPT:
                self._targets.clear()
            self._targets[url] = found
        return found

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        deadline: float,
        keep: int = BODY_KEEP,
    ) -> HttpResponse:
        """One exchange that must complete within ``deadline`` seconds, body included; at most
        ``keep`` bytes of the answer's body are kept (the rest is read and dropped).

        Raises :class:`HttpTransportError` when it cannot be sent, fails or times out.
        """
        target, origin = self._target(url)
        try:
            data = request_head(method, target, headers, len(body)) + body
        except RequestError as exc:
            raise HttpTransportError(f"request to {url} cannot be sent: {exc}", Failure.INVALID) from None
        pool = self._pool
        expires = asyncio.get_running_loop().time() + deadline
        for _ in range(2):  # a second time only on a kept-alive connection closed unanswered
            connection = pool.take(origin) or await self._connect(target, origin, url, deadline, expires)
            reused = connection.served > 0
            try:
                answer: Answer = await connection.exchange(data, keep, expires)
            except TimeoutError:
                pool.discard(connection)
                raise HttpTransportError(_late(url, deadline), Failure.TIMEOUT) from None
            except ConnectionLost as exc:
                pool.discard(connection)
                if reused and not exc.answered:
                    continue
                raise HttpTransportError(f"cannot reach {url}: {exc}", Failure.UNREACHABLE) from None
            except MalformedAnswer as exc:
                pool.discard(connection)
                raise HttpTransportError(f"cannot reach {url}: {exc}", Failure.UNREACHABLE) from None
            except BaseException:
                pool.discard(connection)  # cancelled: the answer would come to nobody
                raise
            pool.give_back(connection)
            return HttpResponse(answer.status, answer.headers, answer.body, answer.truncated)
        closed = f"cannot reach {url}: connection closed before any answer"
        raise HttpTransportError(closed, Failure.UNREACHABLE)

    async def _connect(
        self, target: Target, origin: Origin, url: str, deadline: float, expires: float
    ) -> HttpConnection:
        """A connection for the exchange: the pool's wait and the connect count against its
        deadline; failures translated."""
        try:
            async with asyncio.timeout_at(expires):
                return await self._pool.connect(target, origin)
        except TimeoutError:
            raise HttpTransportError(_late(url, deadline), Failure.TIMEOUT) from None
        except DestinationRefused as exc:
            raise HttpTransportError(f"refused: {exc}", Failure.REFUSED) from None
        except TargetUnreachable as exc:
            raise HttpTransportError(f"cannot reach {url}: {exc}", Failure.UNREACHABLE) from None
        except (OSError, ValueError) as exc:  # (ssl's certificate errors are both)
            raise HttpTransportError(f"cannot reach {url}: {_describe(exc)}", Failure.UNREACHABLE) from None

    async def aclose(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


def delivery_error(exc: HttpTransportError, during: str | None = None) -> DeliveryError:
    """The :mod:`ceprotocols.errors` form of a failed exchange; ``during`` names an exchange
    other than the delivery itself (e.g. ``"webhook validation"``) at the start of the message.

    A timeout and an unreachable target are retryable; a request that cannot be sent is a final
    rejection (``status="invalid"``), since sending it again would fail the same way, and so is a
    host the network policy refuses (:class:`DestinationRefused`, ``status="destination"``).
    """
    message = f"{during}: {exc}" if during else str(exc)
    if exc.failure is Failure.REFUSED:
        return DestinationRefused(message)
    if exc.failure is Failure.TIMEOUT:
        return DeliveryTimeout(message)
    if exc.failure is Failure.INVALID:
        return DeliveryRejected(message, retryable=False, status="invalid")
    return TargetUnreachable(message)


def _late(url: str, deadline: float) -> str:
    return f"no answer from {url} within {deadline}s"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
