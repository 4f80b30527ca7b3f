"""The W3C trace context of one delivery, handed to a sender as plain values.

A broker that traces its deliveries passes the context of each attempt (``traceparent`` and,
if any, ``tracestate``) to :meth:`ceprotocols.sender.Sender.deliver`; each binding puts them in
its own form so that the sink continues the trace: the HTTP headers ``traceparent`` and
``tracestate``, MQTT 5 user properties, AMQP application properties, Kafka headers and NATS
headers, all named ``traceparent`` and ``tracestate``. This library depends on no tracing
library: it only carries the two strings.

These are transport fields, not event attributes: the event's own ``traceparent`` extension
(CloudEvents distributed tracing) is forwarded unchanged where the binding keeps it apart
(``ce-traceparent`` in HTTP, ``ce_traceparent`` in Kafka, ``cloudEvents_traceparent`` in AMQP,
``ce-traceparent`` in NATS). MQTT 5 binary mode names its user properties after the attributes
themselves, so there an event that carries its own ``traceparent`` keeps it and the attempt's
context is not added (see :func:`mqtt_user_properties`).

Receivers read the same fields of each consumed message (:func:`ceprotocols.receiver.trace_of`)
and hand the context to their callback beside the event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``) and optional ``tracestate``."""

    traceparent: str
    tracestate: str | None = None

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """The context as ``(name, value)`` pairs: ``traceparent`` first, then ``tracestate``."""
        if self.tracestate:
            return ((TRACEPARENT, self.traceparent), (TRACESTATE, self.tracestate))
        return ((TRACEPARENT, self.traceparent),)


def mqtt_user_properties(
    trace: TraceContext | None, properties: Sequence[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """``properties`` with the trace context added, unless they name a ``traceparent`` already
    (an MQTT 5 binary-mode event's own attribute, which is forwarded unchanged)."""
    if trace is None or any(name == TRACEPARENT for name, _ in properties):
        return tuple(properties)
    return (*properties, *trace.pairs())
