"""The ingress contract: one :class:`Receiver` per source, feeding decoded events to a callback.

A receiver consumes its source continuously, decodes each message as a CloudEvent (binary or
structured mode) and hands the events to ``on_events``. It acknowledges a message upstream only
after ``on_events`` returned for it, so an event is never acknowledged before the callback has
stored it.

Every message is decoded, size-checked and validated on its own (:func:`decode`): a message that
fails in any way, with any exception, becomes an *invalid message* with a reason, never a failed
batch or a stopped receiver. What ``on_events`` raises decides what happens next:

* :class:`~ceprotocols.errors.BindingError`: the events are not acceptable. A batch is retried
  event by event to find the culprits.
* anything else: a transient failure (storage busy, shutting down). Nothing is acknowledged; the
  same events are handed over again after a pause, in order.

Each invalid message is counted, logged in one line (never with a traceback), reported to
``on_reject`` with the first bytes of the raw message, and then acknowledged in the protocol's
"reject" form (AMQP ``rejected``, JetStream ``term``) or plainly acknowledged where the protocol
has no such form (MQTT, Kafka), so that it is never delivered again and never blocks the source.
Receivers reconnect after connection failures by themselves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ceprotocols.errors import BindingError
from ceprotocols.tracecontext import TRACEPARENT, TRACESTATE, TraceContext

log = logging.getLogger("ceprotocols.receiver")


class OnEvents(Protocol):
    """Receives decoded events, and per event the trace context its message carried in the
    protocol's own form (``traceparent`` header or property; None without one, see
    :mod:`ceprotocols.tracecontext`); returns once they are stored (see the module doc for what
    it raises)."""

    def __call__(
        self, events: list[dict[str, Any]], traces: Sequence[TraceContext | None], /
    ) -> Awaitable[None]: ...


#: Pause before handing the same events over again after a transient failure, and before a
#: reconnect attempt.
RETRY_PAUSE = 0.5
#: How much of a refused message is kept for inspection: payload bytes, headers, header length.
PREVIEW_BYTES = 4096
PREVIEW_HEADERS = 32
PREVIEW_HEADER_VALUE = 256

M = TypeVar("M")


@dataclass(slots=True)
class ReceiverStats:
    """Counters of one receiver, for logs and metrics. ``subscribed`` turns true once the
    receiver consumes (subscription made, link attached, group joined requested) and false while
    it reconnects; ``alive_at`` (``time.monotonic()``) moves each time the receiver polls its
    source or hands events over, so a receiver that stopped moving can be told apart."""

    subscribed: bool = False
    received: int = 0
    accepted: int = 0
    invalid: int = 0
    retries: int = 0
    reconnects: int = 0
    alive_at: float = field(default_factory=time.monotonic)

    def alive(self) -> None:
        """Note that the receiver is making progress."""
        self.alive_at = time.monotonic()


@dataclass(frozen=True, slots=True)
class RawMessage:
    """What is kept of a message for inspection: its size, the first :data:`PREVIEW_BYTES` of
    its payload and its headers (or properties) as text."""

    size: int
    payload: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, payload: bytes | None, headers: Iterable[tuple[str, Any]] = ()) -> RawMessage:
        """A preview of ``payload`` and ``headers`` (values shown as text, escaped where they
        are not valid UTF-8, shortened)."""
        body = payload or b""
        shown: list[tuple[str, str]] = []
        for name, value in headers:
            if len(shown) == PREVIEW_HEADERS:
                break
            shown.append((_text(name), _text(value)[:PREVIEW_HEADER_VALUE]))
        return cls(len(body), bytes(body[:PREVIEW_BYTES]), tuple(shown))


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "backslashreplace")
    text = value if isinstance(value, str) else str(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class Reject:
    """An invalid message: why it was refused and what it looked like."""

    reason: str
    raw: RawMessage
    at: float  # time.time()


#: Receives each invalid message once, before it is acknowledged upstream.
OnReject = Callable[[Reject], None]


@runtime_checkable
class Receiver(Protocol):
    """Consumes one source."""

    source: str
    stats: ReceiverStats

    async def run(self, on_events: OnEvents, on_reject: OnReject | None = None) -> None:
        """Consume until cancelled or :meth:`aclose` is called."""
        ...

    async def aclose(self) -> None:
        """Stop consuming and release the connection."""
        ...


@dataclass(frozen=True, slots=True)
class Decoded:
    """The outcome of decoding one message: an event, or the reason it is not one."""

    event: dict[str, Any] | None
    error: str | None = None
    raw: RawMessage | None = None
    #: The trace context the message carried as a transport field, if any.
    trace: TraceContext | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    """What a receiver accepts from its source: ``max_size`` bytes of payload per message
    (``None``: no limit). The JSON limits are those of :mod:`ceprotocols.jsontext`."""

    max_size: int | None = None


def decode(
    decoder: Callable[[M], dict[str, Any]],
    message: M,
    raw: Callable[[M], RawMessage] | None = None,
    limits: Limits | None = None,
    trace: Callable[[M], TraceContext | None] | None = None,
) -> Decoded:
    """Decode one message with ``decoder``. Any failure, of any exception type (a decoder may
    meet input its authors did not foresee), becomes the reason the message is invalid; an
    oversized message is refused before it is decoded. ``trace`` reads the message's trace
    context (a context it cannot read is none: it never costs the message its outcome)."""
    preview: RawMessage | None = None
    if raw is not None:
        try:
            preview = raw(message)
        except Exception as exc:  # a preview must never cost the message its outcome
            preview = RawMessage(-1, b"", (("preview", f"unavailable: {type(exc).__name__}"),))
    max_size = limits.max_size if limits is not None else None
    if preview is not None and max_size is not None and preview.size > max_size:
        reason = f"the message is {preview.size} bytes, over the limit of {max_size} bytes"
        return Decoded(None, reason, preview)
    try:
        event = decoder(message)
    except BindingError as exc:
        return Decoded(None, str(exc), preview)
    except Exception as exc:
        return Decoded(
            None, f"the message could not be decoded ({type(exc).__name__}: {_short(exc)})", preview
        )
    context = None
    if trace is not None:
        try:
            context = trace(message)
        except Exception:
            context = None
    return Decoded(event, None, preview, context)


def trace_of(pairs: Iterable[tuple[str, str | bytes | None]]) -> TraceContext | None:
    """The ``traceparent`` (and ``tracestate``) among a message's headers or properties."""
    found: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        if key in (TRACEPARENT, TRACESTATE) and value is not None and key not in found:
            found[key] = value.decode("latin-1") if isinstance(value, bytes) else str(value)
    parent = found.get(TRACEPARENT)
    return TraceContext(parent, found.get(TRACESTATE)) if parent else None


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:197] + "..."


class Handover:
    """Hands decoded messages to ``on_events`` with the module's retry and rejection rules."""

    def __init__(self, source: str, stats: ReceiverStats, on_reject: OnReject | None = None) -> None:
        self.source = source
        self.stats = stats
        self.on_reject = on_reject

    async def __call__(self, items: Sequence[Decoded], on_events: OnEvents) -> list[str | None]:
        """Hand over ``items``; the result has, per item, ``None`` when it was accepted or the
        reason it is invalid. Returns only when every item has one of the two outcomes."""
        self.stats.alive()
        self.stats.received += len(items)
        outcome: list[str | None] = [item.error for item in items]
        valid = [(i, item.event, item.trace) for i, item in enumerate(items) if item.event is not None]
        events = [event for _, event, _ in valid]
        if valid and await self._try(events, [trace for _, _, trace in valid], on_events) is not None:
            # The batch was refused: find the invalid events one by one.
            for i, event, trace in valid:
                outcome[i] = await self._try([event], [trace], on_events)
        for item, reason in zip(items, outcome, strict=True):
            if reason is None:
                self.stats.accepted += 1
            else:
                self._invalid(item, reason)
        self.stats.alive()
        return outcome

    def _invalid(self, item: Decoded, reason: str) -> None:
        self.stats.invalid += 1
        log.warning("source %s: invalid message refused: %s", self.source, reason)
        if self.on_reject is None:
            return
        try:
            self.on_reject(Reject(reason, item.raw or RawMessage(-1), time.time()))
        except Exception as exc:  # keeping a copy must not stop the source
            log.warning("source %s: the refused message was not kept: %s", self.source, exc)

    async def _try(
        self, events: list[dict[str, Any]], traces: list[TraceContext | None], on_events: OnEvents
    ) -> str | None:
        """``None`` once ``on_events`` accepted ``events``; the reason if it refused them as
        invalid. Transient failures are retried after a pause, indefinitely (until cancelled)."""
        while True:
            try:
                await on_events(events, traces)
                return None
            except BindingError as exc:
                return str(exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the callback's storage failed: keep the events, try again
                self.stats.retries += 1
                log.warning("source %s: ingest failed, retrying: %s", self.source, exc)
                await asyncio.sleep(RETRY_PAUSE)
