"""AMQP 1.0 ingress: a receiving link that settles each message after the callback stored it.

Source: ``amqp://host[:5672]/<address>`` (e.g. ``amqp://127.0.0.1:5672/queue/in``), optional
``?credit=100``. A stored message is settled ``accepted``; an invalid one ``rejected`` (a broker
such as RabbitMQ dead-letters it when the queue has a dead-letter exchange). A lost connection
is reopened after a pause; unsettled messages are then redelivered by the broker.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from proton import ConnectionException, Message, ProtonException, Timeout
from proton.utils import BlockingConnection, BlockingReceiver

from ceprotocols.amqp import binding
from ceprotocols.amqp.connection import from_proton
from ceprotocols.endpoint import Endpoint, redact
from ceprotocols.errors import SettingsError
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

log = logging.getLogger("ceprotocols.amqp")
BATCH = 100


def decode_message(message: Message) -> dict[str, Any]:
    """A received message as a CloudEvent (raises for anything that is not one, including an
    unusable body section)."""
    return binding.from_message(from_proton(message))


def message_trace(message: Message) -> TraceContext | None:
    """The message's ``traceparent``/``tracestate`` application properties (not the event's
    ``cloudEvents_`` ones)."""
    properties: dict[Any, Any] = dict(message.properties or {})
    return trace_of((str(k), v if isinstance(v, str | bytes) else None) for k, v in properties.items())


def raw_message(message: Message) -> RawMessage:
    """What is kept of a refused message: content type, application properties and body."""
    body = message.body
    if isinstance(body, memoryview | bytes | bytearray):
        payload = bytes(body)
    elif body is None:
        payload = b""
    else:
        payload = str(body).encode("utf-8", "backslashreplace")
    headers: list[tuple[str, Any]] = []
    if message.content_type:
        headers.append(("content-type", message.content_type))
    headers += list((message.properties or {}).items())
    return RawMessage.of(payload, headers)


class AmqpReceiver:
    """Consumes one AMQP address."""

    def __init__(self, source: str, endpoint: Endpoint, limits: Limits | None = None) -> None:
        self.source = redact(source)
        self.limits = limits or Limits()
        self.address = endpoint.path
        if not self.address or self.address == "/":
            raise SettingsError("source", f"{self.source}: the path must be the address to consume")
        self.url = f"{endpoint.scheme}://{endpoint.host}:{endpoint.port}"
        self.credit = int(endpoint.option("credit", str(BATCH)) or BATCH)
        self.user, self.password = endpoint.username, endpoint.password
        self.stats = ReceiverStats()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="amqp-receiver")
        self._connection: BlockingConnection | None = None
        self._receiver: BlockingReceiver | None = None
        self._closed = False

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _open(self) -> None:
        options: dict[str, Any] = {}
        if self.user:
            options.update(user=self.user, password=self.password or "", allowed_mechs="PLAIN")
        self._connection = BlockingConnection(self.url, timeout=10, reconnect=False, **options)
        self._receiver = self._connection.create_receiver(self.address, credit=self.credit)
        self.stats.subscribed = True

    def _fetch(self) -> list[Message]:
        if self._receiver is None:
            self._open()
        if self._receiver is None:  # _open failed half-way
            raise ConnectionException(f"no receiving link on {self.address}")
        messages: list[Message] = []
        try:
            messages.append(self._receiver.receive(timeout=0.5))
            while len(messages) < BATCH:
                messages.append(self._receiver.receive(timeout=0.001))
        except Timeout:
            pass
        return messages

    def _settle(self, outcomes: list[str | None]) -> None:
        if self._receiver is None:
            return
        for reason in outcomes:  # BlockingReceiver settles the oldest unsettled message first
            if reason is None:
                self._receiver.accept()
            else:
                self._receiver.reject()

    def _close_connection(self) -> None:
        connection, self._connection, self._receiver = self._connection, None, None
        self.stats.subscribed = False
        if connection is not None:
            try:
                connection.close()
            except ProtonException:
                log.debug("source %s: closing a broken connection failed", self.source)

    async def run(self, on_events: OnEvents, on_reject: OnReject | None = None) -> None:
        """Consume until closed, reconnecting after failures."""
        handover = Handover(self.source, self.stats, on_reject)
        while not self._closed:
            try:
                messages = await self._call(self._fetch)
                self.stats.alive()
                if messages:
                    decoded: list[Decoded] = [
                        decode(decode_message, m, raw_message, self.limits, message_trace) for m in messages
                    ]
                    outcomes = await handover(decoded, on_events)
                    await self._call(self._settle, outcomes)
            except (ProtonException, OSError) as exc:
                log.warning("source %s: %s; reconnecting", self.source, exc)
                self.stats.reconnects += 1
                await self._call(self._close_connection)
                await asyncio.sleep(RETRY_PAUSE)

    async def aclose(self) -> None:
        """Stop consuming and close the connection."""
        self._closed = True
        await self._call(self._close_connection)
        self._executor.shutdown(wait=False)
