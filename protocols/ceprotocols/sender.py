"""The delivery contract: one :class:`Sender` per protocol, chosen from :data:`SENDERS`.

A sender owns its connections: it keeps one connection (or producer) per sink endpoint and
credentials, shared by every subscription that uses it, reconnects on failure, and confirms a
delivery only when the protocol does (HTTP 2xx, MQTT PUBACK/PUBCOMP, AMQP ``accepted``, Kafka
delivery report, NATS flush or JetStream ack). Failures raise
:class:`ceprotocols.errors.DeliveryError` subclasses, never a client library's exception.
:mod:`ceprotocols.registry` maps protocol names to sender factories.

A sender that can carry several events in one message also implements :class:`BatchSender`;
one whose protocol lets a sink answer a delivery with events (HTTP: a CloudEvent in a 2xx
response) also implements :class:`ReplyingSender`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ceprotocols.signing import WebhookSigning
from ceprotocols.tracecontext import TraceContext

#: A CloudEvent in the JSON event format, as a dict (``data`` or ``data_base64`` for the payload).
Event = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Destination:
    """Where and how to deliver: the subscription's ``sink``, ``protocolsettings`` (defaults
    applied) and ``sinkcredential`` (secrets included, never in the repr)."""

    protocol: str
    sink: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    credential: Mapping[str, Any] | None = field(default=None, repr=False)
    #: Seconds to wait for the protocol's confirmation.
    timeout: float = 10.0
    #: HTTP only: sign every delivery (Standard Webhooks) with these secrets; other protocols
    #: ignore it. See :mod:`ceprotocols.signing`.
    webhook: WebhookSigning | None = field(default=None, repr=False)


@runtime_checkable
class Sender(Protocol):
    """Delivers events over one protocol."""

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Send one event and return once the protocol confirmed it; raise DeliveryError if not.
        ``trace``: the attempt's trace context, carried in the binding's own form
        (:mod:`ceprotocols.tracecontext`)."""
        ...

    async def aclose(self) -> None:
        """Close every connection this sender holds."""
        ...


@runtime_checkable
class BatchSender(Protocol):
    """Delivers several events in one message (HTTP: ``application/cloudevents-batch+json``)."""

    async def deliver_batch(
        self, events: Sequence[Event], destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Send ``events`` in one message and return once the protocol confirmed it: all of them
        are delivered; raise DeliveryError if not (then none of them counts as delivered)."""
        ...


@dataclass(frozen=True, slots=True)
class Reply:
    """What a sink answered to a delivery, as events in the JSON form (attribute checks are the
    caller's): none when the answer holds no event; ``problem`` says why an answer that tried to
    be one could not be read (too large, not decodable), and then ``events`` is empty."""

    events: Sequence[dict[str, Any]] = ()
    problem: str | None = None


@runtime_checkable
class ReplyingSender(Protocol):
    """Delivers like :class:`Sender` and returns the sink's answer as events."""

    async def deliver_replying(
        self, event: Event, destination: Destination, *, limit: int, trace: TraceContext | None = None
    ) -> Reply:
        """Deliver ``event`` as :meth:`Sender.deliver` does; return the events of the sink's
        confirming answer, read up to ``limit`` bytes (a longer answer is a problem)."""
        ...

    async def deliver_batch_replying(
        self,
        events: Sequence[Event],
        destination: Destination,
        *,
        limit: int,
        trace: TraceContext | None = None,
    ) -> Reply:
        """Deliver ``events`` as :meth:`BatchSender.deliver_batch` does, returning the answer."""
        ...
