"""NATS delivery with nats-py.

Sink: ``nats://host[:4222]``. Setting (Subscriptions API 3.2.5.5): ``subject`` (required), and
``contentmode``. When the subject belongs to a JetStream stream the delivery completes on the
stream's publish acknowledgement; otherwise on a flush (the server has received the message:
core NATS has no per-message acknowledgement). Stream membership is looked up once per subject
and remembered for a short while.
"""

from __future__ import annotations

import contextlib
import time

from nats.aio.client import Client
from nats.errors import (
    AuthorizationError,
    BadSubjectError,
    ConnectionClosedError,
    ConnectionReconnectingError,
    FlushTimeoutError,
    MaxPayloadError,
    NoRespondersError,
    OutboundBufferLimitError,
    StaleConnectionError,
)
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import APIError, NotFoundError

from ceprotocols.credentials import Credential, ensure_fresh, parse_credential
from ceprotocols.egress import ConnectGuard, NetworkPolicy, Resolver, system_resolver
from ceprotocols.endpoint import Endpoint, redact, redact_text, sink_endpoint
from ceprotocols.errors import (
    INVALID_EVENT,
    INVALID_SETTINGS,
    DeliveryError,
    DeliveryRejected,
    DeliveryTimeout,
    TargetUnreachable,
)
from ceprotocols.nats import binding
from ceprotocols.nats.client import connect
from ceprotocols.nats.flusher import Flusher
from ceprotocols.nats.settings import SCHEMES, NatsSettings, parse_settings
from ceprotocols.pool import ConnectionPool
from ceprotocols.prepared import PreparedCache
from ceprotocols.sender import Destination, Event
from ceprotocols.tracecontext import TraceContext

_Key = tuple[tuple[tuple[str, int], ...], bool, Credential | None]
#: A destination as each delivery needs it (parsed once): the sink, settings, credential, the
#: sink for messages (no secrets), the connection's key and the key of the subject's stream.
_Prepared = tuple[Endpoint, NatsSettings, Credential | None, str, _Key, tuple[_Key, str]]
#: How long a subject's stream membership is trusted before it is looked up again.
STREAM_LOOKUP_TTL = 30.0


def translate(exc: Exception, where: str) -> DeliveryError:
    """The DeliveryError for a nats-py exception; its message leaves out the user information
    of any URL in ``where`` or the exception's text."""
    text = redact_text(f"{where}: {type(exc).__name__} {exc}".rstrip())
    if isinstance(exc, ConnectionClosedError | ConnectionReconnectingError | StaleConnectionError):
        return TargetUnreachable(text)
    if isinstance(exc, OutboundBufferLimitError):
        return TargetUnreachable(text)
    if isinstance(exc, FlushTimeoutError | NatsTimeout | TimeoutError):
        return DeliveryTimeout(text)
    if isinstance(exc, MaxPayloadError | BadSubjectError | AuthorizationError):
        return DeliveryRejected(text, retryable=False, status=type(exc).__name__)
    if isinstance(exc, APIError):
        return DeliveryRejected(text, status=exc.err_code, retryable=True)
    return DeliveryRejected(text, retryable=True, status=type(exc).__name__)


class NatsSender:
    """Delivers events to NATS; one connection per (servers, credentials), shared.

    Args:
        policy: the addresses servers may have. With a restricted policy every server is
            resolved and checked before connecting, nats-py is given the checked addresses
            (the name kept for TLS) and reconnects only to them, never to servers the cluster
            announces; ``None`` means :meth:`NetworkPolicy.unrestricted`.
        resolver: how host names are resolved when the policy is restricted.
    """

    def __init__(self, *, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver) -> None:
        self._guard = ConnectGuard(policy or NetworkPolicy.unrestricted(), resolver)
        self._prepared = PreparedCache(self._prepare)
        self._pool: ConnectionPool[_Key, Client] = ConnectionPool(self._close)
        self._streams: dict[tuple[_Key, str], tuple[str | None, float]] = {}
        self._flushers: dict[int, Flusher] = {}

    @property
    def connections(self) -> int:
        """How many NATS connections are open."""
        return len(self._pool)

    def _prepare(self, destination: Destination) -> _Prepared:
        endpoint = sink_endpoint(destination.sink, schemes=SCHEMES)
        with INVALID_SETTINGS:
            settings = parse_settings(destination.settings)
            credential = parse_credential(destination.credential, protocol="NATS")
        where = f"NATS {redact(destination.sink)} {settings.subject}"  # no token or password
        key: _Key = (endpoint.hosts, endpoint.tls, credential)
        return endpoint, settings, credential, where, key, (key, settings.subject)

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Publish ``event`` and return once confirmed (see the module doc)."""
        endpoint, settings, credential, where, key, stream_key = self._prepared.get(destination)
        ensure_fresh(credential)
        with INVALID_EVENT:
            message = binding.to_structured(event) if settings.structured else binding.to_binary(event)
        client = self._pool.held(key) or await self._pool.get(
            key, lambda: connect(endpoint, credential, destination.timeout, self._guard)
        )
        if client.is_closed:
            await self._pool.discard(key, client)
            raise TargetUnreachable(f"{where}: connection closed")
        try:
            cached = self._streams.get(stream_key)
            if cached is not None and cached[1] > time.monotonic():
                stream = cached[0]
            else:
                stream = await self._stream_of(key, client, settings.subject, destination.timeout)
            # The binding makes a new dict for every message and nothing keeps it, so it is
            # handed over as it is (JetStream's publish adds its expected-stream header to it).
            raw = message.headers
            headers = raw if isinstance(raw, dict) or raw is None else dict(raw)
            headers = headers or None
            if trace is not None:
                headers = {**(headers or {}), **dict(trace.pairs())}
            if stream is not None:
                await client.jetstream().publish(
                    settings.subject,
                    message.payload,
                    timeout=destination.timeout,
                    stream=stream,
                    headers=headers,
                )
            else:
                await client.publish(settings.subject, message.payload, headers=headers)
                await self._flusher(client).flush(destination.timeout)
        except (NatsError, TimeoutError, OSError) as exc:
            if isinstance(exc, NoRespondersError):  # the stream vanished: look it up again next time
                self._streams.pop(stream_key, None)
            error = translate(exc, where)
            if client.is_reconnecting and isinstance(error, DeliveryTimeout):
                error = TargetUnreachable(f"{where}: server unreachable (reconnecting)")
            raise error from exc

    def _flusher(self, client: Client) -> Flusher:
        flusher = self._flushers.get(id(client))
        if flusher is None:
            flusher = self._flushers[id(client)] = Flusher(client)
        return flusher

    async def _stream_of(self, key: _Key, client: Client, subject: str, within: float) -> str | None:
        """Look up (and remember) which stream, if any, holds ``subject``."""
        now = time.monotonic()
        stream: str | None
        try:
            stream = await client.jetstream(timeout=within).find_stream_name_by_subject(subject)
        except (NotFoundError, NoRespondersError, APIError):
            stream = None  # no stream holds it, or JetStream is not enabled on this server
        self._streams[(key, subject)] = (stream, now + STREAM_LOOKUP_TTL)
        return stream

    async def _close(self, client: Client) -> None:
        self._flushers.pop(id(client), None)
        # An already broken connection has nothing left to close.
        if not client.is_closed:
            with contextlib.suppress(NatsError):
                await client.close()

    async def aclose(self) -> None:
        """Close every connection."""
        await self._pool.aclose()
        self._streams.clear()
