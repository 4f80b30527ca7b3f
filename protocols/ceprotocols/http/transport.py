"""The HTTP client of push delivery: a thin adapter over :class:`aiohttp.ClientSession`.

One session per sender, with one :class:`aiohttp.TCPConnector` pool shared by every
subscription: keep-alive connections per origin, ``limit``/``limit_per_host`` caps, TLS for
``https``. aiohttp's C-accelerated parser reads responses (``Content-Length``, ``chunked`` or
close-delimited bodies, interim ``1xx``) and its writer refuses header values that would
inject a line break. What this module adds is the delivery policy:

* redirects are never followed (HTTP 1.1 Web Hooks for Event Delivery, section 2.2);
* one total timeout per exchange (pool wait, connect, request and the whole response);
* the response body is read up to :data:`BODY_KEEP` bytes (a prefix for dead letters), the rest
  is read and dropped as it arrives so the connection can be reused without buffering it;
* no cookies are kept (two subscriptions to the same host must not share state), no proxy is
  taken from the environment, and the response is not decompressed (none is asked for);
* every aiohttp exception becomes :class:`HttpTransportError` with a :class:`Failure` kind, so
  callers never see aiohttp (nor the user information of the URL, which its message leaves
  out); :func:`delivery_error` turns that into the ceprotocols error.

Deliveries, webhook validation handshakes and token refreshes all use the same session, so a
:class:`~ceprotocols.egress.ConnectGuard` given to the transport checks every one of them: names
through :class:`~ceprotocols.http.resolver.CheckedResolver`, IP-literal hosts (which aiohttp
never resolves) here, before the request. A refused address fails with
:attr:`Failure.REFUSED`, before any connection is opened.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from yarl import URL

from ceprotocols.egress import ConnectGuard
from ceprotocols.egress.addresses import parse_address
from ceprotocols.endpoint import redact_text
from ceprotocols.errors import (
    DeliveryError,
    DeliveryRejected,
    DeliveryTimeout,
    DestinationRefused,
    TargetUnreachable,
)
from ceprotocols.http.resolver import CheckedResolver, RefusedAddress

#: Response body bytes kept (the rest is read and dropped; dead letters keep a prefix only).
BODY_KEEP = 64 * 1024
#: Size of the reads that drain a body beyond the kept prefix.
_DRAIN_CHUNK = 64 * 1024
#: Headers aiohttp would add on its own and a delivery must not send. ``Content-Type``: an
#: event without ``datacontenttype`` has none on purpose (a receiver would read a default
#: ``application/octet-stream`` as the event's ``datacontenttype``). ``Accept-Encoding``: the
#: body is kept raw, so no compressed answer is asked for.
_SKIPPED_HEADERS = frozenset({"Content-Type", "Accept-Encoding"})


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
    """The exchange failed; ``failure`` says how. The message quotes the URL and aiohttp's
    error, but never a URL's user information (it is stored and logged with the delivery)."""

    def __init__(self, message: str, failure: Failure) -> None:
        super().__init__(redact_text(message))
        self.failure = failure

    @property
    def timeout(self) -> bool:
        """Whether the exchange timed out."""
        return self.failure is Failure.TIMEOUT


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """Status, headers (case-insensitive names) and at most :data:`BODY_KEEP` bytes of body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    #: True when the body was longer than the bytes kept (the rest was read and dropped).
    truncated: bool = False

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", "replace")


class HttpTransport:
    """Sends requests over a pooled aiohttp session, created on first use (it needs the loop).

    Args:
        max_connections: connections open at once, all origins together (0: no cap).
        max_per_host: connections open at once to one origin (0: no cap). A request beyond
            either cap waits for a free connection, and that wait counts against its deadline:
            a cap shared by several callers lets the ones whose servers hang take every
            connection from the others, so a caller that bounds its own requests may want none.
        guard: checks every host connected to against a network policy; ``None`` (or an
            unrestricted guard) checks nothing.
    """

    def __init__(
        self, *, max_connections: int = 1024, max_per_host: int = 256, guard: ConnectGuard | None = None
    ) -> None:
        self._limit = max_connections
        self._limit_per_host = max_per_host
        self._guard = guard if guard is not None and guard.restricted else None
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        # URLs whose host the guard has passed: the policy and a URL's literal host never change,
        # so each sink URL is parsed and checked once rather than on every request.
        self._passed: set[str] = set()

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._limit,
            limit_per_host=self._limit_per_host,
            resolver=None if self._guard is None else CheckedResolver(self._guard),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            skip_auto_headers=_SKIPPED_HEADERS,
            trust_env=False,
        )
        return self._session

    def _timeout(self, deadline: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(deadline)
        if timeout is None:
            timeout = aiohttp.ClientTimeout(total=deadline)
            if len(self._timeouts) < 64:  # a handful of distinct per-subscription timeouts
                self._timeouts[deadline] = timeout
        return timeout

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
        if self._guard is not None and url not in self._passed:
            _check_literal(url, self._guard)
            if len(self._passed) >= _PASSED_KEPT:
                self._passed.clear()
            self._passed.add(url)
        session = self._session or self._open()
        try:
            async with session.request(
                method,
                url,
                headers=headers,
                data=body,
                allow_redirects=False,
                timeout=self._timeout(deadline),
            ) as response:
                kept, truncated = await _read_prefix(response.content, keep)
                return HttpResponse(response.status, response.headers, kept, truncated)
        except TimeoutError as exc:  # aiohttp's timeout errors derive from it too
            raise HttpTransportError(f"no answer from {url} within {deadline}s", Failure.TIMEOUT) from exc
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
            raise HttpTransportError(f"not a usable http(s) URL: {exc}", Failure.INVALID) from exc
        except aiohttp.ClientConnectorError as exc:
            if isinstance(exc.os_error, RefusedAddress):  # from CheckedResolver
                raise HttpTransportError(f"refused: {exc.os_error.reason}", Failure.REFUSED) from None
            raise HttpTransportError(f"cannot reach {url}: {_describe(exc)}", Failure.UNREACHABLE) from exc
        except aiohttp.ClientError as exc:
            raise HttpTransportError(f"cannot reach {url}: {_describe(exc)}", Failure.UNREACHABLE) from exc
        except ValueError as exc:
            # aiohttp refuses a header name or value with a control character (CR/LF injection).
            raise HttpTransportError(f"request to {url} cannot be sent: {exc}", Failure.INVALID) from exc
        except OSError as exc:
            raise HttpTransportError(f"cannot reach {url}: {_describe(exc)}", Failure.UNREACHABLE) from exc

    async def aclose(self) -> None:
        """Close the session and every pooled connection."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


#: URLs remembered as passed by the guard (a bound on the memory they take).
_PASSED_KEPT = 4096


def _check_literal(url: str, guard: ConnectGuard) -> None:
    """Refuse an IP-literal host the policy refuses (aiohttp connects to those unresolved)."""
    try:
        host = URL(url).raw_host
    except (ValueError, TypeError):
        return  # not a URL: aiohttp refuses it itself, as INVALID
    literal = None if host is None else parse_address(host)
    if literal is not None:
        reason = guard.policy.check_address(literal)
        if reason is not None:
            raise HttpTransportError(f"refused: host {reason}", Failure.REFUSED)


async def _read_prefix(content: aiohttp.StreamReader, keep: int) -> tuple[bytes, bool]:
    """Up to ``keep`` bytes of the body, and whether there was more (read and dropped)."""
    first = await content.read(keep)
    if not first:
        return b"", False
    parts = [first]
    kept = len(first)
    while kept < keep:
        chunk = await content.read(keep - kept)
        if not chunk:
            return b"".join(parts), False
        parts.append(chunk)
        kept += len(chunk)
    truncated = False
    while await content.read(_DRAIN_CHUNK):
        truncated = True
    return b"".join(parts), truncated


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


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
