"""NATS ingress: a core subscription, or a JetStream pull consumer with ack after storing.

Source: ``nats://host[:4222]/<subject>`` (``>`` and ``*`` wildcards allowed), optional
``?queue=<group>`` for a core queue group, or ``?stream=<name>&durable=<name>`` for JetStream:
each message is acknowledged after the callback stored it, and an invalid one is terminated
(``term``: never redelivered). Core NATS has no acknowledgement at all: a message that arrives
while the callback is failing is retried in process, but is lost if the broker stops first.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeout

from ceprotocols.endpoint import Endpoint, redact
from ceprotocols.errors import DeliveryError, SettingsError
from ceprotocols.nats import binding
from ceprotocols.nats.client import connect
from ceprotocols.receiver import (
    RETRY_PAUSE,
    Decoded,
    Handover,
    Limits,
    OnEvents,
    OnReject,
    RawMessage,
    ReceiverStats,
    decode,
    trace_of,
)
from ceprotocols.tracecontext import TraceContext

log = logging.getLogger("ceprotocols.nats")
BATCH = 100


def to_message(msg: Msg) -> binding.NatsMessage:
    """The binding's view of a received message."""
    return binding.NatsMessage(payload=msg.data, headers=msg.headers)


def decode_message(msg: Msg) -> dict[str, Any]:
    """A received message as a CloudEvent (raises for anything that is not one)."""
    return binding.from_message(to_message(msg))


def message_trace(msg: Msg) -> TraceContext | None:
    """The message's ``traceparent``/``tracestate`` headers (not the event's ``ce-`` ones)."""
    return trace_of((msg.headers or {}).items())


def raw_message(msg: Msg) -> RawMessage:
    """What is kept of a refused message: subject, headers and payload."""
    return RawMessage.of(msg.data, [("subject", msg.subject), *(msg.headers or {}).items()])


class NatsReceiver:
    """Consumes one NATS subject (core or JetStream)."""

    def __init__(self, source: str, endpoint: Endpoint, limits: Limits | None = None) -> None:
        self.source = redact(source)
        self.endpoint = endpoint
        self.limits = limits or Limits()
        self.subject = endpoint.path.strip("/")
        if not self.subject:
            raise SettingsError("source", f"{self.source}: the path must be the subject")
        self.queue = endpoint.option("queue") or ""
        self.stream = endpoint.option("stream")
        self.durable = endpoint.option("durable") or "cebroker"
        self.stats = ReceiverStats()
        self._client: Client | None = None
        self._closed = False

    def _decode(self, messages: list[Msg]) -> list[Decoded]:
        return [decode(decode_message, m, raw_message, self.limits, message_trace) for m in messages]

    async def run(self, on_events: OnEvents, on_reject: OnReject | None = None) -> None:
        """Consume until closed; the client reconnects by itself once connected."""
        handover = Handover(self.source, self.stats, on_reject)
        while not self._closed and self._client is None:
            try:
                self._client = await connect(self.endpoint, None, 5.0, strict_headers=True)
            except DeliveryError as exc:
                log.warning("source %s: %s; retrying", self.source, exc)
                self.stats.reconnects += 1
                await asyncio.sleep(RETRY_PAUSE)
        if self._client is None:
            return
        if self.stream:
            await self._run_jetstream(self._client, handover, on_events)
        else:
            await self._run_core(self._client, handover, on_events)

    async def _run_core(self, client: Client, handover: Handover, on_events: OnEvents) -> None:
        subscription = await client.subscribe(self.subject, queue=self.queue)
        await client.flush()
        self.stats.subscribed = True
        while not self._closed:
            self.stats.alive()
            self.stats.subscribed = client.is_connected  # it reconnects by itself meanwhile
            try:
                messages = [await subscription.next_msg(timeout=0.5)]
            except (NatsTimeout, TimeoutError):
                continue
            except NatsError as exc:
                log.warning("source %s: %s", self.source, exc)
                await asyncio.sleep(RETRY_PAUSE)
                continue
            while len(messages) < BATCH and subscription.pending_msgs:
                messages.append(await subscription.next_msg(timeout=0.1))
            await handover(self._decode(messages), on_events)

    async def _run_jetstream(self, client: Client, handover: Handover, on_events: OnEvents) -> None:
        subscription: Any = None
        while not self._closed:
            self.stats.alive()
            if subscription is not None:
                self.stats.subscribed = client.is_connected
            try:
                if subscription is None:
                    subscription = await client.jetstream().pull_subscribe(
                        self.subject, durable=self.durable, stream=self.stream
                    )
                    self.stats.subscribed = True
                messages: list[Msg] = await subscription.fetch(BATCH, timeout=1.0)
            except (NatsTimeout, TimeoutError):
                continue
            except NatsError as exc:
                log.warning("source %s: %s", self.source, exc)
                await asyncio.sleep(RETRY_PAUSE)
                continue
            outcomes = await handover(self._decode(messages), on_events)
            try:
                for message, reason in zip(messages, outcomes, strict=True):
                    await (message.ack() if reason is None else message.term())
                await client.flush()  # the acknowledgements reach the server before we go on
            except (NatsError, TimeoutError) as exc:  # the server redelivers what it did not get
                log.warning("source %s: acknowledging failed: %s", self.source, exc)

    async def aclose(self) -> None:
        """Stop consuming and close the connection."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None and not client.is_closed:
            try:
                await client.close()
            except NatsError:
                log.debug("source %s: closing a broken connection failed", self.source)
