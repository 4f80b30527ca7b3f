"""Spans of the broker's own hop, after the OpenTelemetry messaging semantic conventions.

One :class:`Tracing` per broker, handed to the parts that trace. With telemetry off it is
:data:`NO_TRACING`: ``enabled`` is False and the callers test that one attribute before doing
anything else, so the hot path pays one attribute read and no tracer call.

The spans (see docs/observability.md for every attribute):

* ``publish`` (PRODUCER), one per accepted event, child of the incoming context: the event's own
  ``traceparent`` attribute (CloudEvents distributed tracing) if it has one, else the transport's
  (the ``traceparent`` header of ``POST /events``). Its context is kept with the event in the
  durable log (:func:`stored_context`).
* ``match`` (INTERNAL), one per ingest request: how many events, how many deliveries matched.
* ``send <PROTOCOL>`` (PRODUCER), one per delivery attempt, child of the publish span it reads back
  from the log, and linked to it; the sink gets the attempt span's own context.
* ``dead_letter`` and ``replay`` (INTERNAL), and the management API's server spans (:mod:`.http`).

Attributes carry ids, names, counts, outcomes and the sink's host, never a URL's user info, a
credential, a header value, a webhook secret or an event's data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ceprotocols.tracecontext import TraceContext
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

#: ``messaging.system`` of every messaging span.
SYSTEM = "cebroker"
INSTRUMENTATION = "cebroker"
_PROPAGATOR = TraceContextTextMapPropagator()
#: The longest reason text kept on a failed attempt or dead-letter span.
MAX_REASON = 256


def traceparent_of(context: SpanContext) -> TraceContext:
    """The W3C form of ``context``."""
    parent = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    state = context.trace_state.to_header() if context.trace_state else ""
    return TraceContext(parent, state or None)


def stored_context(span: Span) -> str:
    """What the durable log keeps of ``span``: its ``traceparent``, then ``;tracestate`` if any
    (a ``traceparent`` has no ``;``, so the first one separates them)."""
    context = traceparent_of(span.get_span_context())
    return context.traceparent if not context.tracestate else f"{context.traceparent};{context.tracestate}"


def parse_stored(text: str | None) -> Context | None:
    """The context of a stored ``traceparent[;tracestate]``, None when absent or unreadable."""
    if not text:
        return None
    parent, _, state = text.partition(";")
    return _context({"traceparent": parent, "tracestate": state} if state else {"traceparent": parent})


def _context(carrier: Mapping[str, str]) -> Context | None:
    context = _PROPAGATOR.extract(carrier)
    span = trace.get_current_span(context)
    return context if span.get_span_context().is_valid else None


def incoming_context(event: Mapping[str, Any], transport: Context | None) -> Context | None:
    """The parent of an event's publish span: its own ``traceparent`` attribute (and
    ``tracestate``) if valid, else the transport's context (parsed once per request), else None
    (a new trace)."""
    own = event.get("traceparent")
    if isinstance(own, str):
        state = event.get("tracestate")
        carrier = {"traceparent": own}
        if isinstance(state, str):
            carrier["tracestate"] = state
        found = _context(carrier)
        if found is not None:
            return found
    return transport


def transport_context(headers: Mapping[str, str]) -> TraceContext | None:
    """The ``traceparent``/``tracestate`` of a request's headers, if it has a ``traceparent``."""
    parent = headers.get("traceparent")
    if not parent:
        return None
    return TraceContext(parent, headers.get("tracestate") or None)


def sink_host(sink: str) -> tuple[str | None, int | None]:
    """The host and port of a sink URL: never its user info (credentials) or path."""
    try:
        parts = urlsplit(sink)
        return parts.hostname, parts.port
    except ValueError:
        return None, None


class Tracing:
    """Starts the broker's spans (see the module docstring); ``enabled`` is the cheap flag."""

    def __init__(self, provider: TracerProvider | None) -> None:
        self.provider = provider
        self.enabled = provider is not None
        self._tracer = (provider or trace.NoOpTracerProvider()).get_tracer(INSTRUMENTATION)

    # -- ingest ------------------------------------------------------------------------------
    def publish(
        self,
        events: Sequence[Mapping[str, Any]],
        transport: TraceContext | None,
        *,
        protocol: str | None,
        carried: Sequence[TraceContext | None] = (),
    ) -> list[Span]:
        """Start one publish span per event (ended by :meth:`published`); ``carried``: per
        event, the context its own message carried (protocol sources), before ``transport``."""
        spans: list[Span] = []
        count = len(events)
        parent = _context(dict(transport.pairs())) if transport is not None else None
        for index, event in enumerate(events):
            own = carried[index] if index < len(carried) else None
            outer = parent if own is None else (_context(dict(own.pairs())) or parent)
            attributes: dict[str, Any] = {
                "messaging.system": SYSTEM,
                "messaging.operation.type": "send",
                "messaging.operation.name": "publish",
                "messaging.message.id": str(event.get("id")),
                "cloudevents.event_id": str(event.get("id")),
                "cloudevents.event_source": str(event.get("source")),
                "cloudevents.event_type": str(event.get("type")),
                "cloudevents.event_spec_version": str(event.get("specversion")),
            }
            if "subject" in event:
                attributes["cloudevents.event_subject"] = str(event["subject"])
            if count > 1:
                attributes["messaging.batch.message_count"] = count
            if protocol is not None:
                attributes["network.protocol.name"] = protocol
            spans.append(
                self._tracer.start_span(
                    "publish",
                    context=incoming_context(event, outer),
                    kind=SpanKind.PRODUCER,
                    attributes=attributes,
                )
            )
        return spans

    @staticmethod
    def published(
        spans: Sequence[Span], duplicates: Sequence[bool] | None, error: BaseException | None
    ) -> None:
        """End the publish spans: committed (``duplicates`` per event) or refused with ``error``."""
        for index, span in enumerate(spans):
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                span.set_attribute("error.type", type(error).__name__)
            elif duplicates is not None and duplicates[index]:
                span.set_attribute("cebroker.duplicate", True)
            span.end()

    def match(self, spans: Sequence[Span]) -> Span:
        """Start the match span of one ingest: child of its first publish span, linked to the
        others (the SDK keeps the first 128 links)."""
        parent = trace.set_span_in_context(spans[0]) if spans else None
        links = [Link(span.get_span_context()) for span in spans[1:]]
        return self._tracer.start_span(
            "match",
            context=parent,
            kind=SpanKind.INTERNAL,
            links=links,
            attributes={"messaging.batch.message_count": len(spans)},
        )

    # -- delivery ----------------------------------------------------------------------------
    def attempt(
        self,
        *,
        stored: str | None,
        protocol: str,
        sink: str,
        subscription: str,
        tenant: str | None,
        attempt: int,
        event_id: str | None,
        circuit: str,
        replay: str | None = None,
        others: Sequence[str | None] = (),
    ) -> tuple[Span, TraceContext]:
        """Start a delivery attempt span (child of the stored publish context, linked to it) and
        return it with the context the sink gets. A batch's attempt is the child of its first
        event's publish span and linked to every event's (``others``: the other events' stored
        contexts)."""
        parent = parse_stored(stored)
        links = []
        for context in (parent, *(parse_stored(other) for other in others)):
            if context is not None:
                links.append(Link(trace.get_current_span(context).get_span_context()))
        batch = 1 + len(others)
        host, port = sink_host(sink)
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "deliver",
            "messaging.destination.name": subscription,
            "cebroker.subscription.id": subscription,
            "cebroker.delivery.protocol": protocol,
            "cebroker.delivery.attempt": attempt,
            "cebroker.circuit.state": circuit,
            "network.protocol.name": protocol.lower(),
        }
        if event_id is not None:
            attributes["messaging.message.id"] = event_id
        if batch > 1:
            attributes["messaging.batch.message_count"] = batch
        if tenant is not None:
            attributes["cebroker.tenant"] = tenant
        if host is not None:
            attributes["server.address"] = host
        if port is not None:
            attributes["server.port"] = port
        if replay is not None:
            attributes["cebroker.replay.id"] = replay
        span = self._tracer.start_span(
            f"send {protocol}", context=parent, kind=SpanKind.PRODUCER, links=links, attributes=attributes
        )
        return span, traceparent_of(span.get_span_context())

    @staticmethod
    def attempted(
        span: Span,
        outcome: str,
        *,
        status: int | str | None = None,
        error: BaseException | None = None,
        circuit: str | None = None,
    ) -> None:
        """End an attempt span with its ``outcome`` (``delivered``, ``retry``,
        ``deadlettered``, ``dropped``, ``released``) and, for a failure, the sink's status code,
        the error's type and the circuit's state after it."""
        span.set_attribute("cebroker.delivery.outcome", outcome)
        if status is not None:  # the sink's status (HTTP) or reason code (other protocols)
            span.set_attribute("cebroker.delivery.status_code", status)
            if isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
        if circuit is not None:
            span.set_attribute("cebroker.circuit.state", circuit)
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, str(error)[:MAX_REASON]))
        span.end()

    def dead_letter(self, parent: Span | None, *, subscription: str, attempts: int, reason: str) -> None:
        """Record that a delivery became a dead letter (a short span under its last attempt)."""
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer.start_span(
            "dead_letter",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes={
                "cebroker.subscription.id": subscription,
                "cebroker.delivery.attempt": attempts,
                "cebroker.deadletter.reason": reason[:MAX_REASON],
            },
        )
        span.end()

    def replay(self, *, replay: str, subscription: str, queued: int) -> None:
        """Record that a replay queued ``queued`` deliveries (one span per window queued; each
        delivery's attempt spans then join its event's original trace)."""
        span = self._tracer.start_span(
            "replay",
            kind=SpanKind.INTERNAL,
            attributes={
                "cebroker.replay.id": replay,
                "cebroker.subscription.id": subscription,
                "cebroker.replay.queued": queued,
            },
        )
        span.end()

    def server(self, method: str, route: str, scheme: str, parent: TraceContext | None) -> Span:
        """Start the server span of a management API request (``route`` is the template)."""
        context = _context(dict(parent.pairs())) if parent is not None else None
        return self._tracer.start_span(
            f"{method} {route}",
            context=context,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route, "url.scheme": scheme},
        )

    def shutdown(self) -> None:
        """Export what is buffered and stop (at the broker's shutdown)."""
        if self.provider is not None:
            self.provider.shutdown()


#: Telemetry off: no provider, ``enabled`` False.
NO_TRACING = Tracing(None)
