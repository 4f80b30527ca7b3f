"""HTTP push delivery: the :class:`ceprotocols.sender.Sender` for ``protocol: HTTP``.

Deliveries, token refreshes and validation handshakes go over one :class:`HttpTransport` (its
kept-alive connections are pooled per origin and shared by every subscription). Protocol settings:
``method`` (default ``POST``), ``headers`` (copied into every request) and ``contentmode``
(``binary``, the default, ``structured``, or ``batch``: :meth:`HttpSender.deliver_batch` sends
several events as one ``application/cloudevents-batch+json`` array, and a single event goes
structured). A destination with
:attr:`~ceprotocols.sender.Destination.webhook` is signed as Standard Webhooks says
(:mod:`ceprotocols.signing`): ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``
over the exact body sent, computed for each attempt. A 2xx confirms; 5xx, 408 and 429 are retryable
rejections carrying ``Retry-After``; other statuses (redirects are never followed) are final.
A request that cannot be sent at all (a header value with a control character, an unusable
URL) is a final rejection too: sending it again would fail the same way.

:meth:`HttpSender.deliver_replying` also reads the confirming answer as events: a body with
``Content-Type: application/cloudevents+json`` is one event (structured mode),
``application/cloudevents-batch+json`` a batch, and an answer with a ``ce-specversion`` header
one event in binary mode; any other answer (an empty 204, plain JSON) holds no event.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from ceprotocols.egress import ConnectGuard, NetworkPolicy, Resolver, system_resolver
from ceprotocols.errors import BindingError, DeliveryRejected
from ceprotocols.http.binding import (
    HTTPMessage,
    binary_parts,
    from_batch,
    from_binary,
    from_structured,
    to_batch,
    to_binary,
    to_structured,
)
from ceprotocols.http.credentials import CredentialResolver
from ceprotocols.http.transport import (
    BODY_KEEP,
    HttpResponse,
    HttpTransport,
    HttpTransportError,
    delivery_error,
)
from ceprotocols.http.webhook import CapFactory, WebhookGate
from ceprotocols.sender import Destination, Event, Reply
from ceprotocols.signing import SIGNATURE_HEADERS, signed_batch_headers, signed_headers
from ceprotocols.tracecontext import TRACEPARENT, TRACESTATE, TraceContext

if TYPE_CHECKING:
    from ceprotocols.sender import BatchSender, ReplyingSender, Sender

#: Largest part of a response body kept for a dead letter.
BODY_LIMIT = 2048
_RETRYABLE = frozenset({408, 429})


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` value (delta-seconds or an HTTP date), None if absent/bad."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class HttpSender:
    """Delivers events to HTTP sinks with pooling, credentials and webhook validation.

    Args:
        validate_webhooks: run the abuse-protection handshake before the first delivery to an origin.
        webhook_origin: the ``WebHook-Request-Origin`` this broker announces (its DNS name).
        max_connections: connections open at once, all sinks together (0: no cap).
        max_per_host: connections open at once to one sink origin (0: no cap). Deliveries
            beyond a cap wait for a free connection, within their timeout.
        policy: the addresses sinks, token endpoints and handshakes may reach; a refused one is
            a final :class:`~ceprotocols.errors.DestinationRefused`. ``None`` means
            :meth:`NetworkPolicy.unrestricted` (tests, trusted embeddings): pass the real one.
        resolver: how host names are resolved when the policy is restricted.
        rate_caps: builds the rate cap a handshake grants an origin (default: in-process).
    """

    def __init__(
        self,
        *,
        validate_webhooks: bool = True,
        webhook_origin: str | None = None,
        max_connections: int = 1024,
        max_per_host: int = 256,
        policy: NetworkPolicy | None = None,
        resolver: Resolver = system_resolver,
        rate_caps: CapFactory | None = None,
    ) -> None:
        guard = ConnectGuard(policy or NetworkPolicy.unrestricted(), resolver)
        self._transport = HttpTransport(
            max_connections=max_connections, max_per_host=max_per_host, guard=guard
        )
        self._credentials = CredentialResolver(self._transport)
        origin = webhook_origin or socket.gethostname()  # no DNS lookup (it could block)
        self._gate = WebhookGate(self._transport, origin, rate_caps) if validate_webhooks else None

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """POST (or the configured method) the event; raise a DeliveryError unless 2xx."""
        settings = destination.settings
        if (
            destination.webhook is not None
            or trace is not None
            or destination.credential
            or settings.get("headers")
            or _structured(settings)
        ):
            message, signing = self._message(event, destination)
            await self._exchange(message, destination, signing, BODY_KEEP, trace)
            return
        # The common delivery (binary mode; no configured headers, trace context, signature or
        # credential): :meth:`_message`, :meth:`_exchange` and :meth:`_send` inlined, since
        # every resumption of the exchange (its answer read) passes through each frame between
        # the lane's worker and the transport, and the message's parts taken as they are (the headers
        # are a dict made for this request).
        try:
            headers, body = binary_parts(event)
        except BindingError as exc:
            raise DeliveryRejected(f"event cannot be encoded for HTTP: {exc}", retryable=False) from exc
        if self._gate is not None:
            await self._gate.admit(destination.sink, destination.timeout)
            headers["WebHook-Request-Origin"] = self._gate.origin
        try:
            response = await self._transport.request(
                _method(settings), destination.sink, headers, body, deadline=destination.timeout
            )
        except HttpTransportError as exc:
            raise delivery_error(exc) from exc
        self._check(response)

    async def deliver_replying(
        self, event: Event, destination: Destination, *, limit: int, trace: TraceContext | None = None
    ) -> Reply:
        """Like :meth:`deliver`; the confirming answer read as events (see the module)."""
        return _reply(await self._deliver(event, destination, limit + 1, trace), limit)

    async def deliver_batch_replying(
        self,
        events: Sequence[Event],
        destination: Destination,
        *,
        limit: int,
        trace: TraceContext | None = None,
    ) -> Reply:
        """Like :meth:`deliver_batch`; the confirming answer read as events (see the module)."""
        return _reply(await self._deliver_batch(events, destination, limit + 1, trace), limit)

    async def _deliver(
        self, event: Event, destination: Destination, keep: int, trace: TraceContext | None
    ) -> HttpResponse:
        message, signing = self._message(event, destination)
        return await self._exchange(message, destination, signing, keep, trace)

    @staticmethod
    def _message(
        event: Event, destination: Destination
    ) -> tuple[HTTPMessage, Callable[[bytes, int], dict[str, str]] | None]:
        """The message of ``event`` and, for a signed destination, what signs it."""
        try:
            message = to_structured(event) if _structured(destination.settings) else to_binary(event)
        except BindingError as exc:
            raise DeliveryRejected(f"event cannot be encoded for HTTP: {exc}", retryable=False) from exc
        webhook = destination.webhook
        signing = (lambda body, at: signed_headers(webhook, event, body, at)) if webhook is not None else None
        return message, signing

    async def deliver_batch(
        self, events: Sequence[Event], destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """POST the events as one ``application/cloudevents-batch+json`` array; a 2xx confirms
        every one of them, anything else none (a DeliveryError as for one event)."""
        await self._deliver_batch(events, destination, BODY_KEEP, trace)

    async def _deliver_batch(
        self, events: Sequence[Event], destination: Destination, keep: int, trace: TraceContext | None
    ) -> HttpResponse:
        try:
            message = to_batch(events)
        except BindingError as exc:
            raise DeliveryRejected(f"events cannot be encoded for HTTP: {exc}", retryable=False) from exc
        webhook = destination.webhook
        signing = (
            (lambda body, at: signed_batch_headers(webhook, events, body, at))
            if webhook is not None
            else None
        )
        return await self._exchange(message, destination, signing, keep, trace)

    async def _exchange(
        self,
        message: HTTPMessage,
        destination: Destination,
        signing: Callable[[bytes, int], dict[str, str]] | None,
        keep: int,
        trace: TraceContext | None = None,
    ) -> HttpResponse:
        settings = destination.settings
        configured = settings.get("headers")
        if configured:
            headers = {str(k): str(v) for k, v in configured.items()}
            headers.update(message.headers)
        else:  # the message's own dict, made for this request
            headers = message.headers
        if trace is not None:  # the attempt's context replaces any configured one
            headers = {k: v for k, v in headers.items() if k.lower() not in (TRACEPARENT, TRACESTATE)}
            headers.update(trace.pairs())
        if self._gate is not None:
            await self._gate.admit(destination.sink, destination.timeout)
            headers["WebHook-Request-Origin"] = self._gate.origin
        if signing is not None:
            # Signed once admitted (a rate cap may have made us wait): the timestamp is the
            # attempt's. The signature covers these bytes, which the transport sends unchanged;
            # same-named headers from the settings would contradict it.
            headers = {k: v for k, v in headers.items() if k.lower() not in SIGNATURE_HEADERS}
            headers.update(signing(message.body, int(time.time())))
        method = _method(settings)
        response = await self._send(method, destination, headers, message.body, keep)
        if response.status == 401 and self._credentials.invalidate(destination.credential):
            response = await self._send(method, destination, headers, message.body, keep)
        self._check(response)
        return response

    async def aclose(self) -> None:
        """Close every connection."""
        await self._transport.aclose()

    async def _send(
        self, method: str, destination: Destination, headers: dict[str, str], body: bytes, keep: int
    ) -> HttpResponse:
        if destination.credential:
            auth = await self._credentials.authorization(destination.credential)
            if auth is not None:
                headers["Authorization"] = auth
        try:
            return await self._transport.request(
                method, destination.sink, headers, body, deadline=destination.timeout, keep=keep
            )
        except HttpTransportError as exc:
            raise delivery_error(exc) from exc

    @staticmethod
    def _check(response: HttpResponse) -> None:
        status = response.status
        if 200 <= status < 300:
            return
        retryable = status >= 500 or status in _RETRYABLE
        raise DeliveryRejected(
            f"sink answered {status}",
            retryable=retryable,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            status=status,
            body=response.text[:BODY_LIMIT],
        )


def _method(settings: Mapping[str, Any]) -> str:
    """The request's method: the configured one, POST by default."""
    return str(settings.get("method") or "POST").upper()


_STRUCTURED = "application/cloudevents+json"
_BATCH = "application/cloudevents-batch+json"


def _reply(response: HttpResponse, limit: int) -> Reply:
    """The events of a confirming answer (see the module); a problem when it cannot be read."""
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    binary = "ce-specversion" in response.headers
    if media not in (_STRUCTURED, _BATCH) and not binary:
        return Reply()
    if response.truncated or len(response.body) > limit:
        return Reply(problem=f"the answer is larger than {limit} bytes")
    try:
        if media == _BATCH:
            events = from_batch(response.body)
            if not all(isinstance(e, dict) for e in events):
                return Reply(problem="a member of the answered batch is not a JSON object")
            return Reply(events=events)
        if media == _STRUCTURED:
            return Reply(events=[from_structured(response.body)])
        return Reply(events=[from_binary(response.headers, response.body)])
    except BindingError as exc:
        return Reply(problem=f"the answer is not a readable CloudEvent: {exc}")


def _structured(settings: Mapping[str, Any]) -> bool:
    return str(settings.get("contentmode") or "binary").lower() in ("structured", "batch")


if TYPE_CHECKING:
    _check_contract: Sender = HttpSender()
    _check_batches: BatchSender = HttpSender()
    _check_replies: ReplyingSender = HttpSender()
